// Reading records of format version 1 (private to src/measure/).
#pragma once

#include <tuple>

#include <nlohmann/json.hpp>

#include "tensortune/measure/measure_result.h"

namespace tensortune::measure::detail {

/// The task, state and result of a version 1 record line, parsed as `doc`;
/// a kParse error naming the key (as a dotted path) and what was found there.
std::tuple<te::Task, schedule::State, MeasureResult> record_v1_from_json(const nlohmann::json& doc);

}  // namespace tensortune::measure::detail
