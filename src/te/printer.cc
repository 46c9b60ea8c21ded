#include "tensortune/te/printer.h"

#include <sstream>

#include "tensortune/support/strings.h"

namespace tensortune::te {

std::string print_stages(const std::vector<Tensor>& outputs) {
  std::ostringstream os;
  for (const Tensor& t : post_order_tensors(outputs)) {
    std::vector<std::string> dims;
    for (int64_t d : t.shape()) dims.push_back(std::to_string(d));
    if (t.is_placeholder()) {
      os << t.name() << " = placeholder([" << join(dims, ", ") << "], " << t.dtype().str() << ")\n";
      continue;
    }
    auto op = t.compute_op();
    std::vector<std::string> axes;
    for (const auto& iv : op->axis) axes.push_back(iv->var->name);
    os << t.name() << "[" << join(axes, ", ") << "] = " << ir::to_string(op->body);
    os << "  # " << t.dtype().str() << "[" << join(dims, ", ") << "]";
    if (!op->tag.empty()) os << ", " << op->tag;
    os << "\n";
  }
  return os.str();
}

}  // namespace tensortune::te
