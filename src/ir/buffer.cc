#include "tensortune/ir/buffer.h"

namespace tensortune::ir {

void BufferNode::declare(FieldList<BufferNode>& f) {
  f.def("name", &BufferNode::name)
      .def("dtype", &BufferNode::dtype)
      .def("shape", &BufferNode::shape)
      .def("strides", &BufferNode::strides)
      .def("scope", &BufferNode::scope)
      .validate([](const BufferNode& n) {
        TT_CHECK(n.strides.size() == n.shape.size(), kInvalidArgument, "buffer '", n.name, "' has ",
                 n.shape.size(), " dimensions but ", n.strides.size(), " strides");
        for (size_t d = 0; d < n.shape.size(); ++d) {
          TT_CHECK(n.shape[d] >= 0 && n.strides[d] >= 0, kInvalidArgument, "buffer '", n.name,
                   "': negative extent or stride in dimension ", d);
        }
      });
}

TT_REGISTER_NODE(BufferNode);

Buffer Buffer::make(std::string name, DataType dtype, std::vector<int64_t> shape,
                    std::vector<int64_t> strides, std::string scope) {
  if (strides.empty()) {
    strides.assign(shape.size(), 1);
    for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
      strides[d] = strides[d + 1] * shape[d + 1];
    }
  }
  TT_CHECK(strides.size() == shape.size(), kInvalidArgument, "buffer '", name, "' has ",
           shape.size(), " dimensions but ", strides.size(), " strides");
  auto n = make_node<BufferNode>();
  n->name = std::move(name);
  n->dtype = dtype;
  n->shape = std::move(shape);
  n->strides = std::move(strides);
  n->scope = std::move(scope);
  return Buffer(n);
}

int64_t Buffer::storage_elements() const {
  int64_t last = 0;
  for (size_t d = 0; d < get()->shape.size(); ++d) {
    if (get()->shape[d] == 0) return 0;
    last += (get()->shape[d] - 1) * get()->strides[d];
  }
  return last + 1;
}

}  // namespace tensortune::ir
