/// \file
/// Buffers: the memory that loop-nest programs read and write. A buffer has a
/// logical shape and the strides (in elements) of its layout; loads and stores
/// address it with one flat element index.
#pragma once

#include <string>
#include <vector>

#include "tensortune/ir/dtype.h"
#include "tensortune/object/object.h"

namespace tensortune::ir {

struct BufferNode : Object {
  std::string name;
  DataType dtype;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  ///< one per dimension, in elements
  std::string scope = "global";  ///< "global" for kernel arguments, "local" for allocations
  TT_NODE(BufferNode, "ir.Buffer")
  static void declare(FieldList<BufferNode>& f);
};

class Buffer : public Ref<BufferNode> {
 public:
  using Ref<BufferNode>::Ref;
  /// A buffer; empty `strides` means dense row-major.
  static Buffer make(std::string name, DataType dtype, std::vector<int64_t> shape,
                     std::vector<int64_t> strides = {}, std::string scope = "global");
  /// Elements the buffer's storage spans (the largest flat index + 1).
  int64_t storage_elements() const;
};

}  // namespace tensortune::ir
