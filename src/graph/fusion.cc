#include "tensortune/graph/fusion.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "tensortune/support/strings.h"
#include "tensortune/te/attrs.h"

namespace tensortune::graph {

bool FusedGroup::is_view() const { return calls.size() == 1 && view_offset(*calls[0]); }

std::optional<int64_t> view_offset(const CallNode& call) {
  if (call.op == "reshape") return 0;
  // Whole words of four bytes are the bytes' own memory, read as int32.
  if (call.op == "nn.pack_int8x4" && call.args[0]->shape.back() % 4 == 0) return 0;
  const auto* a = dynamic_cast<const te::SliceAttrsNode*>(call.attrs.get());
  if (call.op != "slice" || !a || call.args.size() != 1) return std::nullopt;
  const std::vector<int64_t>& in = call.args[0]->shape;
  const std::vector<int64_t>& out = call.shape;
  const size_t rank = in.size();
  if (out.size() != rank) return std::nullopt;
  for (size_t d = 0; d < a->strides.size(); ++d) {
    if (a->strides[d] != 1) return std::nullopt;
  }
  // The axis the rows run along: the first of extent other than 1.
  size_t axis = 0;
  while (axis + 1 < rank && out[axis] == 1) ++axis;
  for (size_t d = axis + 1; d < rank; ++d) {
    if (out[d] != in[d]) return std::nullopt;
  }
  // The first element's position: a begin as te's slice reads it with
  // stride 1 (negative counts from the end; clamped into the extent).
  int64_t offset = 0;
  for (size_t d = 0; d < rank; ++d) {
    int64_t begin = d < a->begin.size() ? a->begin[d] : 0;
    if (begin < 0) begin = std::max<int64_t>(begin + in[d], 0);
    offset = offset * in[d] + std::min(begin, in[d]);
  }
  return offset * call.dtype.bytes();
}

std::string FusedGroup::description() const {
  std::vector<std::string> ops;
  for (const auto& c : calls) ops.push_back(c->op);
  return join(ops, "+");
}

namespace {

bool is_elementwise(te::OpPattern p) {
  return p == te::OpPattern::kElemwise || p == te::OpPattern::kBroadcast;
}

/// The positions of the elementwise calls after the one at `start` that
/// take in every reader of its value and converge on one call, the
/// converging call last: GELU's x * 0.5 * (1 + erf(x / sqrt 2)) reads x
/// twice, and both paths meet in the last multiply. Empty when the readers
/// do not converge within `budget` elementwise calls or one of them is
/// `taken` (in a group already).
std::vector<size_t> converging_region(const std::vector<Ref<CallNode>>& calls, size_t start,
                                      const std::unordered_map<const Object*, int>& readers,
                                      const std::function<bool(const Object*)>& taken,
                                      size_t budget) {
  // Reader edges of the region's values not yet inside the region; the
  // region is closed when only its newest call's are left.
  std::unordered_map<const Object*, int> open{{calls[start].get(), readers.at(calls[start].get())}};
  std::vector<size_t> region;
  for (size_t position = start + 1; position < calls.size(); ++position) {
    const Ref<CallNode>& c = calls[position];
    int edges = 0;
    for (const auto& a : c->args) edges += open.count(a.get());
    if (edges == 0) continue;
    if (!is_elementwise(te::find_op(c->op).pattern) || taken(c.get())) return {};
    for (const auto& a : c->args) {
      auto it = open.find(a.get());
      if (it != open.end() && --it->second == 0) open.erase(it);
    }
    region.push_back(position);
    auto it = readers.find(c.get());
    int outside = it == readers.end() ? 0 : it->second;
    if (outside > 0) open[c.get()] = outside;
    if (open.size() == 1 && open.count(c.get())) return region;
    // Nothing reads the region's last call, an output of the graph is
    // inside it, or the budget is spent before the branches met.
    if (open.empty() || outside >= 1000 || region.size() >= budget) return {};
  }
  return {};
}

/// Input channels up to which a convolution reads its data through the
/// transpose before it (an image's 3 colours): its reduction broadcasts
/// one value of the data at a time, from any address alike.
constexpr int64_t kTransposedImageChannels = 4;

/// The group a convolution joins when its data is an image of a few
/// channels turned NHWC, read by it alone: a group of one NCHW-to-NHWC
/// transpose and elementwise work around it (an exported model's
/// normalisation of the image, a float16 image's cast). The convolution
/// then reads the image where it lies, and the pass that only moved it is
/// gone. Otherwise nullopt.
template <typename Building>
std::optional<size_t> image_transpose_group(
    const CallNode& c, const std::unordered_map<const Object*, size_t>& group_of,
    const std::vector<Building>& groups, const std::unordered_map<const Object*, int>& readers,
    size_t max_calls) {
  if (c.op != "nn.conv2d" || c.args.empty()) return std::nullopt;
  const auto& conv = dynamic_cast<const te::Conv2dAttrsNode&>(*c.attrs);
  const Value& data = c.args[0];
  auto read = readers.find(data.get());
  if (conv.data_layout != "NHWC" || read == readers.end() || read->second != 1 ||
      data->shape.size() != 4 || data->shape.back() > kTransposedImageChannels) {
    return std::nullopt;
  }
  auto it = group_of.find(data.get());
  if (it == group_of.end()) return std::nullopt;
  const Building& g = groups[it->second];
  if (g.heavy || g.group.calls.size() >= max_calls || !g.group.calls.back().same_as(data)) {
    return std::nullopt;
  }
  // NCHW to NHWC, nothing else: the image's axes are the convolution's.
  const std::vector<int64_t> to_nhwc = {0, 2, 3, 1};
  int transposes = 0;
  bool elementwise = true;
  for (const auto& call : g.group.calls) {
    if (call->op == "transpose") {
      const auto* perm = dynamic_cast<const te::TransposeAttrsNode*>(call->attrs.get());
      transposes += perm && perm->perm == to_nhwc ? 1 : 2;
    } else {
      elementwise &= is_elementwise(te::find_op(call->op).pattern);
    }
  }
  if (transposes != 1 || !elementwise) return std::nullopt;
  return it->second;
}

}  // namespace

std::vector<FusedGroup> fuse_groups(const Graph& graph, size_t max_calls) {
  std::vector<Ref<CallNode>> calls = calls_in_order(graph);
  // Readers of each value (calls, and the graph's outputs).
  std::unordered_map<const Object*, int> readers;
  for (const auto& c : calls) {
    for (const auto& a : c->args) ++readers[a.get()];
  }
  for (const auto& o : graph->outputs) readers[o.get()] += 1000;  // an output is never fused away
  struct Building {
    FusedGroup group;
    bool heavy = false;  ///< has an anchor or a reduction
    size_t last = 0;     ///< position of its last call
  };
  std::vector<Building> groups;
  std::unordered_map<const Object*, size_t> group_of;
  // Calls of a converging region (see converging_region) joined to the
  // group they read before their turn comes.
  std::unordered_map<const Object*, size_t> planned;
  std::unordered_set<size_t> planned_groups;  ///< the groups `planned` joins calls to
  std::unordered_map<const Object*, size_t> position_of;
  for (size_t position = 0; position < calls.size(); ++position) {
    position_of[calls[position].get()] = position;
  }
  for (size_t position = 0; position < calls.size(); ++position) {
    const Ref<CallNode>& c = calls[position];
    te::OpPattern pattern = te::find_op(c->op).pattern;
    std::optional<size_t> joined;
    if (auto it = planned.find(c.get()); it != planned.end()) joined = it->second;
    if (!joined) joined = image_transpose_group(*c, group_of, groups, readers, max_calls);
    // A view is its operand's memory, never part of a kernel, and nothing
    // joins a view.
    if (!joined && !view_offset(*c) && pattern != te::OpPattern::kAnchor) {
      for (const auto& a : c->args) {
        auto it = group_of.find(a.get());
        if (it == group_of.end()) continue;
        Building& g = groups[it->second];
        if (!g.group.calls.back().same_as(a) || g.group.calls.size() >= max_calls) continue;
        if (g.group.is_view()) continue;
        if (pattern == te::OpPattern::kInjective && g.heavy) continue;
        // A reduction takes in the elementwise work before it (a residual
        // add before a norm), not another reduction or an anchor.
        if (pattern == te::OpPattern::kReduction && g.heavy) continue;
        if (readers[a.get()] != 1) {
          // Several readers may still all join when they are elementwise
          // and meet again (a diamond), so that the value never leaves the
          // kernel.
          if (!is_elementwise(pattern) || readers[a.get()] >= 1000) continue;
          auto taken = [&](const Object* call) {
            return planned.count(call) > 0 || group_of.count(call) > 0;
          };
          std::vector<size_t> region = converging_region(calls, position_of.at(a.get()), readers,
                                                         taken, max_calls - g.group.calls.size());
          if (region.empty()) continue;
          for (size_t r : region) planned[calls[r].get()] = it->second;
          planned_groups.insert(it->second);
        }
        joined = it->second;
        break;
      }
    }
    if (!joined) {
      groups.emplace_back();
      joined = groups.size() - 1;
    }
    if (is_elementwise(pattern)) {
      // The other operands' groups join too when this call alone reads
      // them, they are elementwise work of the same shape (no anchor or
      // reduction, nothing a broadcast would recompute per element) and no
      // call is planned into them: an LSTM's gates, each a separate
      // activation of a slice, become one kernel with the cell update.
      for (const auto& a : c->args) {
        auto it = group_of.find(a.get());
        if (it == group_of.end() || it->second == *joined) continue;
        const size_t from = it->second;
        Building& other = groups[from];
        if (other.heavy || other.group.is_view() || !other.group.calls.back().same_as(a) ||
            readers[a.get()] != 1 || a->shape != c->shape ||
            other.group.calls.size() + groups[*joined].group.calls.size() >= max_calls) {
          continue;
        }
        if (planned_groups.count(from)) continue;
        std::vector<Ref<CallNode>>& into = groups[*joined].group.calls;
        for (auto& moved : other.group.calls) {
          group_of[moved.get()] = *joined;
          into.push_back(std::move(moved));
        }
        other.group.calls.clear();
        std::stable_sort(into.begin(), into.end(), [&](const auto& x, const auto& y) {
          return position_of.at(x.get()) < position_of.at(y.get());
        });
      }
    }
    Building& g = groups[*joined];
    g.group.calls.push_back(c);
    g.heavy |= pattern == te::OpPattern::kAnchor || pattern == te::OpPattern::kReduction;
    g.last = position;
    group_of[c.get()] = *joined;
  }
  // In the order of their last calls: a call that joined a group may read a
  // group made after it (a residual add reading the shortcut's conv), and
  // only a group's last call is read from outside it, so this order runs
  // every producer first.
  std::stable_sort(groups.begin(), groups.end(),
                   [](const Building& a, const Building& b) { return a.last < b.last; });
  std::vector<FusedGroup> out;
  for (auto& g : groups) {
    if (g.group.calls.empty()) continue;  // joined another group
    std::unordered_set<const Object*> inside, seen;
    for (const auto& c : g.group.calls) inside.insert(c.get());
    for (const auto& c : g.group.calls) {
      for (const auto& a : c->args) {
        if (!inside.count(a.get()) && seen.insert(a.get()).second) g.group.inputs.push_back(a);
      }
    }
    out.push_back(std::move(g.group));
  }
  return out;
}

te::Workload group_workload(const FusedGroup& group) {
  std::vector<te::Tensor> placeholders;
  std::vector<int> constants;
  std::unordered_map<const Object*, te::Tensor> tensor_of;
  for (size_t i = 0; i < group.inputs.size(); ++i) {
    const Value& v = group.inputs[i];
    placeholders.push_back(te::placeholder(v->shape, v->dtype, "p" + std::to_string(i)));
    tensor_of[v.get()] = placeholders.back();
    if (dynamic_cast<const ConstantNode*>(v.get())) constants.push_back(static_cast<int>(i));
  }
  te::Tensor out;
  for (const auto& c : group.calls) {
    std::vector<te::Tensor> args;
    for (const auto& a : c->args) args.push_back(tensor_of.at(a.get()));
    out = te::find_op(c->op).compute(args, c->attrs.get());
    TT_ICHECK(out.shape() == c->shape && out.dtype() == c->dtype, "operator ", c->op,
              " lowered to a tensor of another type than it infers");
    tensor_of[c.get()] = out;
  }
  return te::make_dag_workload(placeholders, {out}, constants);
}

}  // namespace tensortune::graph
