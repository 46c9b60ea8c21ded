/// \file
/// The one JSON form of every node graph.
///
/// A graph is saved as `{"format": "tensortune.graph", "version": 1, "root": R,
/// "nodes": [...]}` where every node is written once, after the nodes it refers
/// to, as `{"type": KEY, FIELD: VALUE, ...}`, and a reference is the index of
/// the referred node in "nodes". A node shared by two parents is therefore
/// read back shared. Loading checks everything: unknown type keys, missing and
/// extra fields, wrong field types, references that are not to an earlier node
/// (dangling or cyclic), and graphs deeper than kMaxGraphDepth, each reported
/// as a user error naming the node index, the type and the field.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "tensortune/object/object.h"

namespace tensortune {

/// The version of the saved-graph format this build writes and reads.
inline constexpr int kGraphFormatVersion = 1;

/// Deepest node chain the loader accepts (the structural algorithms recurse).
inline constexpr int kMaxGraphDepth = 8192;

/// The JSON form of the graph rooted at `root` (which may be null).
nlohmann::json save_json(const ObjectPtr& root);

/// The saved value of every declared field of `node`, by field name: what a
/// saved graph holds for the node, without its "type" (node.type_key()). For
/// nodes of plain data; a field holding a node reference is a
/// kInvalidArgument error naming it, since its saved value (an index) only
/// means something inside a whole graph.
nlohmann::json field_values(const Object& node);
/// The saved value of one field of `node`, with field_values' rule for references.
nlohmann::json field_value(const Object& node, const FieldInfo& field);

/// Reads a graph saved by save_json; see the file comment for what is checked.
ObjectPtr load_json(const nlohmann::json& doc);

/// save_json(root).dump(indent), byte for byte. Compact text (the default) is
/// written straight from the fields, without building the DOM.
std::string save_string(const ObjectPtr& root, int indent = -1);

/// Parses text and loads it; a JSON syntax error names its byte offset. Reads
/// the text directly, without building the DOM, and gives what
/// load_json(parse_json_text(text)) gives: the same graph, or the same error.
ObjectPtr load_string(std::string_view text);

/// Deepest nesting of arrays and objects that parse_json_text accepts: copying,
/// comparing and printing JSON values recurse once per level.
inline constexpr int kMaxJsonNesting = 512;

/// Parses strict JSON text (RFC 8259; no comments, byte-order mark or trailing
/// commas); a syntax error, invalid UTF-8, a key repeated in one object or
/// nesting deeper than kMaxJsonNesting is a kParse error naming the byte offset.
/// The one JSON reader of the project: load_string reads with it too.
nlohmann::json parse_json_text(std::string_view text, std::string_view what = "JSON");

/// Runs the checks a loaded node of its type gets: the declared ranges
/// (FieldList::range), then the type's validate(). For option sets built in
/// code: the library checks them where it takes them.
void validate(const Object& node);

/// Loads `value` into the field `name` of `node`, as a saved node's field is
/// loaded, and checks the field's range: a command line setting one option.
/// A bad value is a user error saying what is valid.
void set_field(Object& node, std::string_view name, const nlohmann::json& value);

/// A number as range errors write it: whole numbers without a fraction.
std::string number_text(double value);
/// The valid values of `field`, e.g. "from 1 to 100000".
std::string range_text(const FieldInfo& field);

namespace detail {
/// load_string's text reader alone: the graph, or std::nullopt where
/// load_string hands the text to the DOM path (bad input, or a form the reader
/// leaves to it, such as escaped keys). For tests.
std::optional<ObjectPtr> load_text_directly(std::string_view text);
}  // namespace detail

template <class T>
nlohmann::json save_json(const Ref<T>& root) {
  return save_json(ObjectPtr(root.ptr()));
}
template <class T>
std::string save_string(const Ref<T>& root, int indent = -1) {
  return save_string(ObjectPtr(root.ptr()), indent);
}

/// Loads a graph whose root must be a T (or a subclass); otherwise a kTypeMismatch error.
template <class R>
R load_json_as(const nlohmann::json& doc) {
  ObjectPtr node = load_json(doc);
  auto typed = std::dynamic_pointer_cast<const typename R::NodeType>(node);
  if (node && !typed) {
    fail(ErrorKind::kTypeMismatch, "the saved root is a ", node->type_key(),
         ", which is not the kind of object expected here");
  }
  return R(std::move(typed));
}

}  // namespace tensortune
