#include "tensortune/search/cost_model.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>

#include "tensortune/support/files.h"
#include "tensortune/support/hash.h"
#include "tensortune/support/strings.h"

namespace tensortune::search {
namespace {

/// What a saved model was made for: the feature count and names. A model
/// file made for another feature set is refused, not misread.
std::string feature_signature() {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto& name : feature_names()) h = hash_combine(h, hash_string(name));
  return std::to_string(kFeaturesPerStore) + ":" + std::to_string(h);
}

constexpr const char* kSignatureAttr = "tensortune_features";

void check_xgb(int rc, std::string_view what) {
  if (rc != 0) fail(ErrorKind::kRuntime, "XGBoost failed to ", what, ": ", XGBGetLastError());
}

/// A DMatrix of the rows of `programs`, freed with the object.
class Matrix {
 public:
  explicit Matrix(const std::vector<const ProgramFeatures*>& programs) {
    std::vector<float> data;
    for (const auto* p : programs) {
      data.insert(data.end(), p->values.begin(), p->values.end());
      rows_ += static_cast<size_t>(p->rows);
    }
    // XGBoost refuses a matrix without rows; one row of zeros stands in.
    if (rows_ == 0) data.assign(kFeaturesPerStore, 0.0f);
    check_xgb(XGDMatrixCreateFromMat(data.data(), std::max<size_t>(rows_, 1), kFeaturesPerStore,
                                     std::numeric_limits<float>::quiet_NaN(), &handle_),
              "build a feature matrix");
  }
  ~Matrix() {
    if (handle_) XGDMatrixFree(handle_);
  }
  Matrix(const Matrix&) = delete;
  Matrix& operator=(const Matrix&) = delete;
  DMatrixHandle get() const { return handle_; }
  size_t rows() const { return rows_; }

 private:
  DMatrixHandle handle_ = nullptr;
  size_t rows_ = 0;
};

/// Row predictions (margins) summed per program.
std::vector<float> program_sums(const float* rows,
                                const std::vector<const ProgramFeatures*>& programs) {
  std::vector<float> sums;
  sums.reserve(programs.size());
  size_t r = 0;
  for (const auto* p : programs) {
    float s = 0;
    for (int k = 0; k < p->rows; ++k) s += rows[r++];
    sums.push_back(s);
  }
  return sums;
}

std::vector<float> margins(BoosterHandle booster, const Matrix& m, bool training) {
  bst_ulong n = 0;
  const float* out = nullptr;
  check_xgb(XGBoosterPredict(booster, m.get(), /*option_mask=output margin*/ 1, 0, training ? 1 : 0,
                             &n, &out),
            "predict");
  return std::vector<float>(out, out + n);
}

}  // namespace

// ---------------------------------------------------------------------------
// Dataset

void Dataset::add(const std::string& task_key, ProgramFeatures features, double cost) {
  bool ok = std::isfinite(cost) && cost > 0;
  if (ok) {
    ++successes_;
    auto [it, inserted] = best_.emplace(task_key, cost);
    if (!inserted) it->second = std::min(it->second, cost);
  }
  programs_.push_back({task_key, std::move(features), ok ? cost : HUGE_VAL});
}

std::vector<float> Dataset::labels() const {
  std::vector<float> out;
  out.reserve(programs_.size());
  for (const auto& p : programs_) {
    auto it = best_.find(p.task);
    out.push_back(it == best_.end() || !std::isfinite(p.cost)
                      ? 0.0f
                      : static_cast<float>(it->second / p.cost));
  }
  return out;
}

// ---------------------------------------------------------------------------
// Models

std::vector<std::string> cost_model_names() { return {"xgb", "random"}; }

std::unique_ptr<CostModel> make_cost_model(std::string_view name, uint64_t seed) {
  if (name == "xgb") return std::make_unique<XgbCostModel>(seed);
  if (name == "random") return std::make_unique<RandomCostModel>(seed);
  fail(ErrorKind::kInvalidArgument, "unknown cost model '", name,
       "'; the cost models are: ", join(cost_model_names(), ", "));
}

std::unique_ptr<CostModel> load_cost_model(const std::string& path, uint64_t seed) {
  auto model = std::make_unique<XgbCostModel>(seed);
  model->load(path);
  return model;
}

std::vector<float> RandomCostModel::predict(const std::vector<const ProgramFeatures*>& programs) {
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> out;
  out.reserve(programs.size());
  for (size_t i = 0; i < programs.size(); ++i) out.push_back(u(rng_));
  return out;
}

void RandomCostModel::save(const std::string&) const {
  fail(ErrorKind::kInvalidArgument, "the random cost model has nothing to save");
}

XgbCostModel::XgbCostModel(uint64_t seed, XgbOptions options)
    : options_(options), fallback_(seed) {}

XgbCostModel::~XgbCostModel() {
  if (booster_) XGBoosterFree(booster_);
}

std::string XgbCostModel::train(const Dataset& data) {
  if (data.size() < options_.min_programs) {
    return "the cost model waits for " + std::to_string(options_.min_programs) +
           " measured programs (has " + std::to_string(data.size()) + ")";
  }
  if (data.successes() == 0) return "no measured program succeeded yet";
  std::vector<const ProgramFeatures*> programs;
  for (size_t i = 0; i < data.size(); ++i) programs.push_back(&data.features(i));
  std::vector<float> labels = data.labels();
  Matrix m(programs);
  if (m.rows() == 0) return "the measured programs have no stores to learn from";

  BoosterHandle booster = nullptr;
  DMatrixHandle dm = m.get();
  check_xgb(XGBoosterCreate(&dm, 1, &booster), "create a booster");
  struct Guard {
    BoosterHandle* b;
    ~Guard() {
      if (*b) XGBoosterFree(*b);
    }
  } guard{&booster};
  int threads = options_.threads > 0
                    ? options_.threads
                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::pair<const char*, std::string> params[] = {
      {"max_depth", std::to_string(options_.max_depth)},
      {"eta", format_double(options_.eta)},
      {"gamma", format_double(options_.gamma)},
      {"min_child_weight", format_double(options_.min_child_weight)},
      {"base_score", "0"},
      {"tree_method", "hist"},
      {"nthread", std::to_string(threads)},
      {"seed", "0"},
      {"verbosity", "0"}};
  for (const auto& [k, v] : params)
    check_xgb(XGBoosterSetParam(booster, k, v.c_str()), "set a parameter");

  // Pack-sum: a program's prediction is the sum of its rows'; the loss is
  // w * (sum - y)^2 with w = y + 0.1, so the fast programs are fit best and
  // the slow ones still count. Each row gets its program's gradient.
  std::vector<float> grad(m.rows()), hess(m.rows());
  double best_rmse = HUGE_VAL;
  int since_best = 0;
  for (int round = 0; round < options_.max_rounds; ++round) {
    std::vector<float> rows =
        round == 0 ? std::vector<float>(m.rows(), 0.0f) : margins(booster, m, /*training=*/true);
    std::vector<float> sums = program_sums(rows.data(), programs);
    double se = 0, weight_sum = 0;
    size_t r = 0;
    for (size_t p = 0; p < programs.size(); ++p) {
      float w = labels[p] + 0.1f;
      float g = (sums[p] - labels[p]) * w;
      se += w * (sums[p] - labels[p]) * (sums[p] - labels[p]);
      weight_sum += w;
      for (int k = 0; k < programs[p]->rows; ++k, ++r) {
        grad[r] = g;
        hess[r] = w;
      }
    }
    double rmse = std::sqrt(se / std::max(weight_sum, 1e-9));
    if (rmse < best_rmse - 1e-6) {
      best_rmse = rmse;
      since_best = 0;
    } else if (++since_best >= options_.early_stopping_rounds) {
      break;
    }
    check_xgb(XGBoosterBoostOneIter(booster, m.get(), grad.data(), hess.data(), m.rows()), "train");
  }
  if (booster_) XGBoosterFree(booster_);
  booster_ = booster;
  booster = nullptr;
  return "";
}

std::vector<float> XgbCostModel::predict(const std::vector<const ProgramFeatures*>& programs) {
  if (!booster_) return fallback_.predict(programs);
  Matrix m(programs);
  if (m.rows() == 0) return std::vector<float>(programs.size(), 0.0f);
  std::vector<float> rows = margins(booster_, m, /*training=*/false);
  return program_sums(rows.data(), programs);
}

void XgbCostModel::save(const std::string& path) const {
  TT_CHECK(booster_, kInvalidArgument,
           "the XGBoost cost model has not been trained yet: nothing to save");
  check_xgb(XGBoosterSetAttr(booster_, kSignatureAttr, feature_signature().c_str()),
            "label the model");
  bst_ulong len = 0;
  const char* bytes = nullptr;
  check_xgb(XGBoosterSaveModelToBuffer(booster_, R"({"format": "json"})", &len, &bytes),
            "save the model");
  write_file_atomically(path, std::string(bytes, len));
}

void XgbCostModel::load(const std::string& path) {
  std::optional<std::string> bytes = read_file_if_exists(path);
  TT_CHECK(bytes, kNotFound, "cannot read the cost model file '", path, "'");
  BoosterHandle booster = nullptr;
  check_xgb(XGBoosterCreate(nullptr, 0, &booster), "create a booster");
  if (XGBoosterLoadModelFromBuffer(booster, bytes->data(), bytes->size()) != 0) {
    std::string why = XGBGetLastError();
    why = why.substr(0, std::min<size_t>(why.find('\n'), 200));
    XGBoosterFree(booster);
    fail(ErrorKind::kParse, "'", path, "' is not a readable cost model (", why,
         "); make one with `tensortune train-model LOG -o MODEL`");
  }
  int found = 0;
  const char* signature = nullptr;
  if (XGBoosterGetAttr(booster, kSignatureAttr, &signature, &found) != 0 || !found ||
      std::string(signature) != feature_signature()) {
    XGBoosterFree(booster);
    fail(ErrorKind::kParse, "'", path,
         found ? "' was trained on another feature set than this tensortune extracts"
               : "' is an XGBoost model, but not one tensortune trained",
         "; train it again with `tensortune train-model LOG -o MODEL`");
  }
  if (booster_) XGBoosterFree(booster_);
  booster_ = booster;
}

}  // namespace tensortune::search
