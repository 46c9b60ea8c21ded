// save_string and load_string, which write and read JSON text directly, on a
// toy node type with a field of every supported kind. The DOM path
// (save_json + dump, parse_json_text + load_json) is the reference: the text
// writer must give its bytes, and the text reader the same graph, or, on bad
// input, the same error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "common/node_samples.h"
#include "common/random_expr.h"
#include "common/test_util.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"

namespace tensortune {

enum class Shade { kLight, kDark };
template <>
struct EnumNames<Shade> {
  static constexpr std::array<std::string_view, 2> names = {"light", "dark"};
};

namespace {

using json = nlohmann::json;

/// A value type saved as a JSON array [x, y].
struct Point {
  static constexpr const char* kTypeName = "point";
  int64_t x = 0, y = 0;
  json to_json() const { return json::array({x, y}); }
  static Point from_json(const json& j) {
    if (!j.is_array() || j.size() != 2 || !j[0].is_number_integer() || !j[1].is_number_integer()) {
      fail(ErrorKind::kTypeMismatch, "expected a point [x, y], got ", j.dump());
    }
    return {j[0].get<int64_t>(), j[1].get<int64_t>()};
  }
  uint64_t hash() const { return hash_combine(static_cast<uint64_t>(x), static_cast<uint64_t>(y)); }
  std::string str() const { return "(" + std::to_string(x) + ", " + std::to_string(y) + ")"; }
  bool operator==(const Point&) const = default;
};

// Members ordered by alignment, so the layout check of registry_test.cc finds no hole.
struct TextAllNode : Object {
  Ref<TextAllNode> next;
  std::vector<Ref<Object>> kids;
  std::string text;
  json data;
  std::vector<int64_t> ints;
  std::vector<double> reals;
  std::vector<Point> points;
  int64_t i64 = 0;
  uint64_t u64 = 0;
  double real = 0;
  Point point;
  int32_t i32 = 0;
  Shade shade = Shade::kLight;
  int8_t i8 = 0;
  bool flag = false;
  TT_NODE(TextAllNode, "test.TextAll")
  static void declare(FieldList<TextAllNode>& f) {
    f.def("next", &TextAllNode::next)
        .def("kids", &TextAllNode::kids)
        .def("text", &TextAllNode::text)
        .def("data", &TextAllNode::data)
        .def("ints", &TextAllNode::ints)
        .def("reals", &TextAllNode::reals)
        .def("points", &TextAllNode::points)
        .def("i64", &TextAllNode::i64)
        .def("u64", &TextAllNode::u64)
        .def("real", &TextAllNode::real)
        .def("point", &TextAllNode::point)
        .def("i32", &TextAllNode::i32)
        .def("shade", &TextAllNode::shade)
        .def("i8", &TextAllNode::i8)
        .def("flag", &TextAllNode::flag)
        .validate([](const TextAllNode& n) {
          TT_CHECK(n.text != "invalid", kInvalidArgument, "text may not be 'invalid'");
        });
  }
};

/// Fields whose names sort after "type", so "type" is not last in the saved text.
struct TextLeafNode : Object {
  int64_t value = 0;
  int64_t weight = 0;
  TT_NODE(TextLeafNode, "test.TextLeaf")
  static void declare(FieldList<TextLeafNode>& f) {
    f.def("weight", &TextLeafNode::weight).def("value", &TextLeafNode::value);
  }
};

TT_REGISTER_NODE(TextAllNode);
TT_REGISTER_NODE(TextLeafNode);

using All = Ref<TextAllNode>;

All all(std::function<void(TextAllNode&)> fill = nullptr) {
  auto n = make_node<TextAllNode>();
  if (fill) fill(*n);
  return All(n);
}

Ref<Object> leaf(int64_t value) {
  auto n = make_node<TextLeafNode>();
  n->value = value;
  n->weight = -value;
  return Ref<Object>(std::shared_ptr<const Object>(n));
}

/// A graph using every field kind, with a leaf shared by two parents.
All sample() {
  Ref<Object> shared = leaf(7);
  All inner = all([&](TextAllNode& n) {
    n.kids = {shared, leaf(-3)};
    n.text = "inner";
  });
  return all([&](TextAllNode& n) {
    n.next = inner;
    n.kids = {shared, Ref<Object>(inner), Ref<Object>()};
    n.text = "quote \" backslash \\ slash / tab \t newline \n nul " + std::string(1, '\0') +
             " \x01\x1f\x7f é 中 😀";
    n.data = json::parse(R"({"z": [1, -2, 3.5, null, true, "s\n"], "a": {"deep": [[[]]]},
                             "u": 18446744073709551615, "n": -9223372036854775808})");
    n.ints = {0, -1, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
    n.reals = {0.1,          -0.0,          1.0,
               1e15,         1e16,          1e300,
               5e-324,       123456789.125, std::numeric_limits<double>::max(),
               std::nan(""), INFINITY,      -INFINITY};
    n.points = {{1, 2}, {1, 2}, {-3, 4}, {1, 2}};
    n.i64 = std::numeric_limits<int64_t>::min();
    n.u64 = std::numeric_limits<uint64_t>::max();
    n.real = -2.5e-8;
    n.point = {-7, 8};
    n.i32 = -2147483647 - 1;
    n.shade = Shade::kDark;
    n.i8 = -128;
    n.flag = true;
  });
}

/// The DOM path: what load_string did before it read text itself.
ObjectPtr load_dom(std::string_view text) { return load_json(parse_json_text(text)); }

struct Outcome {
  bool ok = false;
  ObjectPtr graph;
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;
};

template <class F>
Outcome outcome(F&& load) {
  Outcome o;
  try {
    o.graph = load();
    o.ok = true;
  } catch (const Error& e) {
    o.kind = e.kind();
    o.message = e.what();
  }
  return o;
}

/// load_string and the DOM path agree on `text`: the same graph, or the same
/// error. With `direct`, load_string's text reader must also have read it
/// itself, not handed it to the DOM path.
::testing::AssertionResult paths_agree(std::string_view text, bool direct = false) {
  if (direct && !detail::load_text_directly(text)) {
    return ::testing::AssertionFailure() << "the text reader left this to the DOM path: " << text;
  }
  if (auto read = detail::load_text_directly(text)) {
    // What the reader gives alone is what load_string gives.
    if (!structural_equal(*read, load_string(text))) {
      return ::testing::AssertionFailure() << "load_text_directly differs from load_string";
    }
  }
  Outcome fast = outcome([&] { return load_string(text); });
  Outcome dom = outcome([&] { return load_dom(text); });
  if (fast.ok != dom.ok) {
    return ::testing::AssertionFailure()
           << (fast.ok ? "load_string accepted" : "load_string rejected (" + fast.message + ")")
           << " what the DOM path " << (dom.ok ? "accepted" : "rejected (" + dom.message + ")")
           << ": " << text;
  }
  if (!fast.ok) {
    if (fast.kind != dom.kind || fast.message != dom.message) {
      return ::testing::AssertionFailure()
             << "errors differ: '" << fast.message << "' and '" << dom.message << "' for " << text;
    }
    return ::testing::AssertionSuccess();
  }
  if (!structural_equal(fast.graph, dom.graph) ||
      (fast.graph && save_string(fast.graph) != save_string(dom.graph))) {
    return ::testing::AssertionFailure() << "graphs differ for " << text;
  }
  return ::testing::AssertionSuccess();
}

/// Both paths reject `text` with the same error, of `kind` and containing `needle`.
void expect_load_error(const std::string& text, ErrorKind kind, const std::string& needle) {
  SCOPED_TRACE(text.size() < 300 ? text : text.substr(0, 300) + "...");
  EXPECT_FALSE(detail::load_text_directly(text));
  EXPECT_TRUE(paths_agree(text));
  EXPECT_TRUE(testing::throws_error([&] { load_string(text); }, kind, needle));
}

/// The saved text of sample(), with the first `from` replaced by `to`.
/// sample() saves as: leaf 0, leaf 1, inner node 2, root node 3 (children
/// first); the first occurrence of a field of both TextAll nodes is node 2's.
std::string edited(const std::string& from, const std::string& to) {
  std::string text = save_string(sample());
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

/// The saved text of sample() with nodes[node][field] set to `value`.
std::string with(size_t node, const std::string& field, json value) {
  json doc = save_json(sample());
  doc["nodes"][node][field] = std::move(value);
  return doc.dump();
}

/// The text of one graph of one node (index 0) of type test.TextLeaf, with `fields`.
std::string leaf_text(const std::string& fields) {
  return R"({"format":"tensortune.graph","nodes":[{"type":"test.TextLeaf",)" + fields +
         R"(}],"root":0,"version":1})";
}

// ---- the writer ----

TEST(TextFormat, SaveStringIsTheDumpOfSaveJson) {
  All x = sample();
  EXPECT_EQ(save_string(x), save_json(x).dump());
  EXPECT_EQ(json::parse(save_string(x)), save_json(x));
  EXPECT_EQ(save_string(ObjectPtr()), save_json(ObjectPtr()).dump());
  EXPECT_EQ(save_string(leaf(1)), save_json(leaf(1)).dump());
  EXPECT_EQ(save_string(x, 2), save_json(x).dump(2));
}

TEST(TextFormat, SaveStringIsTheDumpOfSaveJsonForEveryNodeType) {
  for (const auto& [key, make] : testing::node_samples()) {
    ObjectPtr sample = make();
    EXPECT_EQ(save_string(sample), save_json(sample).dump()) << key;
  }
}

TEST(TextFormat, SaveStringIsTheDumpOfSaveJsonForRandomExpressions) {
  std::vector<ir::Var> vars = {ir::Var::make("x"), ir::Var::make("y"), ir::Var::make("z")};
  for (uint32_t seed = 0; seed < 300; ++seed) {
    testing::RandomExprGen g(seed, vars);
    ir::Expr e = seed % 3 == 0 ? g.int_expr(5) : seed % 3 == 1 ? g.float_expr(5) : g.bool_expr(4);
    std::string text = save_string(e);
    ASSERT_EQ(text, save_json(e).dump());
    ObjectPtr back = load_string(text);
    ASSERT_TRUE(structural_equal(ObjectPtr(e.ptr()), back));
    ASSERT_EQ(save_string(back), text);
  }
}

TEST(TextFormat, EscapesStringsAsDumpDoes) {
  std::string every_byte;
  for (int c = 1; c < 0x80; ++c) every_byte += static_cast<char>(c);
  for (const std::string& s :
       {std::string(), std::string("plain"), std::string(1, '\0'), every_byte,
        std::string("é中😀\xf4\x8f\xbf\xbf"), std::string("\"\\/\b\f\n\r\t")}) {
    All x = all([&](TextAllNode& n) { n.text = s; });
    std::string text = save_string(x);
    EXPECT_EQ(text, save_json(x).dump());
    EXPECT_TRUE(paths_agree(text, /*direct=*/true));
    EXPECT_EQ(std::static_pointer_cast<const TextAllNode>(load_string(text))->text, s);
  }
  std::string out;
  detail::append_json_string(out, std::string("\x01\x1f\x7f", 3));
  EXPECT_EQ(out, "\"\\u0001\\u001f\x7f\"");
}

TEST(TextFormat, InvalidUtf8ThrowsAsDumpDoes) {
  for (const char* bad : {"\xff", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "ok\xe4\xb8"}) {
    All x = all([&](TextAllNode& n) { n.text = bad; });
    std::string dom_message, text_message;
    try {
      (void)save_json(x).dump();
    } catch (const json::type_error& e) {
      dom_message = e.what();
    }
    try {
      (void)save_string(x);
    } catch (const json::type_error& e) {
      text_message = e.what();
    }
    EXPECT_FALSE(dom_message.empty()) << bad;
    EXPECT_EQ(text_message, dom_message) << bad;
  }
}

TEST(TextFormat, NumbersAsDumpWritesThem) {
  auto text_of = [](double v) {
    std::string out;
    detail::append_json_double(out, v);
    return out;
  };
  EXPECT_EQ(text_of(1.0), "1.0");
  EXPECT_EQ(text_of(-0.0), "-0.0");
  EXPECT_EQ(text_of(0.1), "0.1");
  EXPECT_EQ(text_of(1e20), "1e+20");
  EXPECT_EQ(text_of(1e-7), "1e-07");
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    uint64_t bits = rng();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    if (!std::isfinite(v)) continue;
    ASSERT_EQ(text_of(v), json(v).dump()) << bits;
  }
  std::string out;
  detail::append_json_int(out, std::numeric_limits<int64_t>::min());
  detail::append_json_int(out, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(out, "-922337203685477580818446744073709551615");
}

TEST(TextFormat, JsonValuesAsDumpWritesThem) {
  json v = json::parse(R"({"b": [1, -1, 2.5, "x\u0001", null, false, {}, []], "a": {"c": 1e300}})");
  v["nan"] = std::nan("");
  v["inf"] = INFINITY;
  std::string out;
  detail::append_json_value(out, v);
  EXPECT_EQ(out, v.dump());
}

// ---- the reader ----

TEST(TextFormat, RoundTripsEveryFieldKindExactly) {
  All x = sample();
  std::string text = save_string(x);
  auto back = load_json_as<All>(json::parse(text));
  auto fast = std::static_pointer_cast<const TextAllNode>(load_string(text));
  ASSERT_TRUE(fast);
  EXPECT_TRUE(structural_equal(ObjectPtr(back.ptr()), ObjectPtr(fast)));
  EXPECT_EQ(save_string(ObjectPtr(fast)), text);
  EXPECT_EQ(fast->text, x->text);
  EXPECT_EQ(fast->data, x->data);
  EXPECT_EQ(fast->ints, x->ints);
  EXPECT_EQ(fast->points, x->points);
  EXPECT_EQ(fast->i64, x->i64);
  EXPECT_EQ(fast->u64, x->u64);
  EXPECT_EQ(fast->i32, x->i32);
  EXPECT_EQ(fast->i8, x->i8);
  EXPECT_EQ(fast->shade, Shade::kDark);
  EXPECT_TRUE(fast->flag);
  ASSERT_EQ(fast->reals.size(), x->reals.size());
  for (size_t i = 0; i < x->reals.size(); ++i) {
    if (std::isnan(x->reals[i])) {
      EXPECT_TRUE(std::isnan(fast->reals[i]));
    } else {
      EXPECT_EQ(std::signbit(fast->reals[i]), std::signbit(x->reals[i])) << i;
      EXPECT_EQ(fast->reals[i], x->reals[i]) << i;
    }
  }
  EXPECT_EQ(fast->real, x->real);
  // The leaf shared by the root and its `next` is one node again.
  EXPECT_TRUE(fast->kids[0].same_as(fast->next->kids[0]));
  EXPECT_TRUE(fast->kids[1].same_as(fast->next));
  EXPECT_FALSE(fast->kids[2]);
}

TEST(TextFormat, RandomDoublesRoundTripExactly) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 200; ++i) {
    All x = all([&](TextAllNode& n) {
      for (int k = 0; k < 50; ++k) {
        uint64_t bits = rng();
        double v;
        std::memcpy(&v, &bits, sizeof v);
        if (!std::isnan(v)) n.reals.push_back(v);
      }
    });
    auto back = std::static_pointer_cast<const TextAllNode>(load_string(save_string(x)));
    ASSERT_EQ(back->reals.size(), x->reals.size());
    for (size_t k = 0; k < x->reals.size(); ++k) {
      ASSERT_EQ(std::memcmp(&back->reals[k], &x->reals[k], sizeof(double)), 0) << x->reals[k];
    }
  }
}

TEST(TextFormat, ReadsWhatTheDomPathReads) {
  // Forms save_string never writes but load_json accepts. The text reader
  // reads these itself:
  std::string saved = save_string(sample());
  std::vector<std::string> direct = {
      saved,
      save_string(sample(), 2),
      save_string(sample(), 0),
      " \t\r\n" + saved + " \n",
      leaf_text(R"("value":1,"weight":2)"),
      leaf_text(R"("weight":2,"value":1)"),
      leaf_text(R"( "weight" : -0 , "value" : 1 )"),
      R"({"version":1,"root":0,"nodes":[{"value":5,"weight":6,"type":"test.TextLeaf"}],"format":"tensortune.graph"})",
      R"({"format":"tensortune.graph","nodes":[{"type":"test.TextLeaf","value":1,"weight":2}],"root":null,"version":1})",
      R"({"format":"tensortune.graph","nodes":[],"root":null,"version":1})",
      edited(R"("text":")", R"("text":"\u00e9\ud83d\ude00\/\b\f\n\r\t\"\\ \u0000 \u001F\uFFFF)"),
      edited(R"("reals":[])",
             R"("reals":[4.9e-324,0E0,-0.0,18446744073709551616,-9223372036854775809,1E2,2.5e-3])"),
      edited(R"("data":null)", R"("data":{"k":[1,{"x":[]}],"j":2})"),
      edited(R"("data":null)",
             R"("data":[1.0, -0, 1e5, "\u00e9", {"b":1,"a":2}, 18446744073709551615, -1])"),
      edited(R"("data":null)", R"("data":"plain")"),
      edited(R"("data":null)", R"("data":-7)"),
      edited(R"("points":[])", R"("points":[[1, 2 ],  [ 3,4]])"),
      edited(R"("point":[0,0])", R"("point":[ 9223372036854775807 , -9223372036854775808 ])"),
      edited(R"("i8":0)", R"("i8":127)"),
      edited(R"("real":0.0)", R"("real":"-inf")"),
      edited(R"("real":0.0)", R"("real":3)"),
      edited(R"("shade":"light")", R"("shade":"d\u0061rk")"),
  };
  for (const auto& text : direct) EXPECT_TRUE(paths_agree(text, /*direct=*/true));
  // ... and leaves these to the DOM path, which loads them:
  std::vector<std::string> dom = {
      leaf_text(R"("weight":2,"v\u0061lue":1)"),
      R"({"format":"tensortune.graph","nodes":[{"type":"test.T\u0065xtLeaf","value":1,"weight":2}],"root":0,"version":1})",
      R"({"format":"tensortune.graph","nodes":[17, "garbage"],"root":null,"version":1})",
      edited(R"("reals":[])", R"("reals":[1e-400])"),
  };
  for (const auto& text : dom) {
    EXPECT_TRUE(paths_agree(text)) << text;
    EXPECT_NO_THROW(load_string(text)) << text;
  }
  // Check a few values the text reader decoded.
  auto escaped = std::static_pointer_cast<const TextAllNode>(load_string(direct[10]));
  EXPECT_EQ(escaped->next->text,
            "é😀/\b\f\n\r\t\"\\ " + std::string(1, '\0') + " \x1f\xef\xbf\xbfinner");
  auto reals = std::static_pointer_cast<const TextAllNode>(load_string(direct[11]))->next->reals;
  EXPECT_EQ(reals, (std::vector<double>{4.9e-324, 0, -0.0, 18446744073709551616.0,
                                        -9223372036854775809.0, 100, 0.0025}));
  EXPECT_TRUE(std::signbit(reals[2]));
  auto data = std::static_pointer_cast<const TextAllNode>(load_string(direct[13]))->next->data;
  EXPECT_EQ(data, json::parse(R"([1.0, -0, 1e5, "é", {"a":2,"b":1}, 18446744073709551615, -1])"));
  EXPECT_TRUE(data[0].is_number_float());
  EXPECT_TRUE(data[5].is_number_unsigned());
  auto leaf0 = std::static_pointer_cast<const TextLeafNode>(load_string(direct[6]));
  EXPECT_EQ(leaf0->weight, 0);
  EXPECT_EQ(leaf0->value, 1);
}

TEST(TextFormat, ValueMemoTracksChangingValues) {
  // The value-type memo must not hand out a stale value when values alternate.
  All a = all([](TextAllNode& n) { n.points = {{1, 2}, {3, 4}, {1, 2}, {3, 4}, {5, 6}}; });
  All b = all([](TextAllNode& n) { n.points = {{3, 4}, {1, 2}}; });
  for (int round = 0; round < 2; ++round) {
    for (const All& x : {a, b}) {
      auto back = std::static_pointer_cast<const TextAllNode>(load_string(save_string(x)));
      EXPECT_EQ(back->points, x->points);
      EXPECT_EQ(save_string(x), save_json(x).dump());
    }
  }
}

// ---- errors: the same as the DOM path's, naming node, type and field ----

TEST(TextFormat, SyntaxErrorsNameTheByteOffset) {
  expect_load_error(R"({"a": })", ErrorKind::kParse, "invalid JSON at byte offset 7");
  expect_load_error("", ErrorKind::kParse, "invalid JSON at byte offset 1");
  std::string saved = save_string(sample());
  expect_load_error(saved.substr(0, saved.size() - 1), ErrorKind::kParse,
                    "invalid JSON at byte offset");
  expect_load_error(saved + "x", ErrorKind::kParse, "invalid JSON at byte offset");
  expect_load_error(saved + "{}", ErrorKind::kParse, "invalid JSON at byte offset");
  expect_load_error(edited(R"("text":")", "\"text\":\"\x01"), ErrorKind::kParse, "byte offset");
  expect_load_error(edited(R"("text":")", "\"text\":\"\xff"), ErrorKind::kParse, "byte offset");
  expect_load_error(edited(R"("text":")", R"("text":"\x)"), ErrorKind::kParse, "byte offset");
  expect_load_error(edited(R"("text":")", R"("text":"\ud800")"), ErrorKind::kParse, "byte offset");
  expect_load_error(edited(R"("text":")", R"("text":"\udc00)"), ErrorKind::kParse, "byte offset");
  expect_load_error(edited(R"("i64":0)", R"("i64":01)"), ErrorKind::kParse, "byte offset");
  expect_load_error(edited(R"("i64":0)", R"("i64":+1)"), ErrorKind::kParse, "byte offset");
  expect_load_error(edited(R"("i64":0)", R"("i64":1.)"), ErrorKind::kParse, "byte offset");
  expect_load_error(edited(R"("i64":0)", R"("i64":-)"), ErrorKind::kParse, "byte offset");
  expect_load_error(edited(R"("i64":0)", R"("i64":1e)"), ErrorKind::kParse, "byte offset");
  expect_load_error(edited(R"("ints":[])", R"("ints":[1,])"), ErrorKind::kParse, "byte offset");
  expect_load_error(edited(R"("ints":[])", R"("ints":[,1])"), ErrorKind::kParse, "byte offset");
  expect_load_error(edited(R"("ints":[])", R"("ints":[1 2])"), ErrorKind::kParse, "byte offset");
  expect_load_error(edited(R"("ints":[])", R"("ints":[)"), ErrorKind::kParse, "byte offset");
  expect_load_error(edited(R"("data":null)", R"("data":{"a" 1})"), ErrorKind::kParse,
                    "byte offset");
  expect_load_error(edited(R"("data":null)", R"("data":{"a":1,})"), ErrorKind::kParse,
                    "byte offset");
  expect_load_error(edited(R"("data":null)", R"("data":{1:1})"), ErrorKind::kParse, "byte offset");
  expect_load_error(edited(R"("data":null)", "\"data\":\"\t\""), ErrorKind::kParse, "byte offset");
  expect_load_error(edited(R"("flag":true)", R"("flag":tru)"), ErrorKind::kParse, "byte offset");
  expect_load_error(edited(R"("flag":true)", R"("flag":nulll)"), ErrorKind::kParse, "byte offset");
  expect_load_error(edited(R"("real":0.0)", R"("real":1e999)"), ErrorKind::kParse,
                    "number overflow: 1e999 is beyond the range of a double");
  expect_load_error("\xef\xbb\xbf" + saved + "]", ErrorKind::kParse, "byte offset");
}

TEST(TextFormat, NestingDeeperThanTheLimitIsRejected) {
  // The top-level object, "nodes" and the node take three levels already.
  auto nested = [](int levels) {
    return edited(R"("data":null)",
                  "\"data\":" + std::string(levels, '[') + std::string(levels, ']'));
  };
  EXPECT_TRUE(paths_agree(nested(kMaxJsonNesting - 3), /*direct=*/true));
  expect_load_error(nested(kMaxJsonNesting - 2), ErrorKind::kParse,
                    "nested deeper than 512 levels");
  expect_load_error(nested(100000), ErrorKind::kParse, "nested deeper than 512 levels");
  // Lists of lists count too.
  EXPECT_TRUE(paths_agree(edited(R"("points":[])", R"("points":[[1,2]])"), /*direct=*/true));
}

TEST(TextFormat, AKeyTwiceInOneObjectIsRejected) {
  // Which of the two values a reader keeps is not defined by JSON: refuse both.
  expect_load_error(leaf_text(R"("weight":2,"value":1,"value":3)"), ErrorKind::kParse,
                    "the key \"value\" appears twice in one object");
  expect_load_error(leaf_text(R"("weight":2,"value":1,"v\u0061lue":3)"), ErrorKind::kParse,
                    "appears twice");
  expect_load_error(
      R"({"format":"tensortune.graph","nodes":[],"root":null,"version":1,"version":1})",
      ErrorKind::kParse, "the key \"version\" appears twice");
  expect_load_error(edited(R"("data":null)", R"("data":{"k":1,"k":1})"), ErrorKind::kParse,
                    "appears twice");
  EXPECT_TT_ERROR(parse_json_text(R"({"a":{"b":1},"a":2})", "settings"), kParse,
                  "invalid settings at byte offset 14: the key \"a\" appears twice");
}

TEST(TextFormat, ParseJsonTextAgreesWithNlohmannsParser) {
  // nlohmann::json's own parser is the oracle for what JSON is: on random
  // edits of valid text, parse_json_text accepts what it accepts and reads
  // the same value, but for the forms this reader is stricter about (a
  // repeated key, a byte-order mark).
  const std::vector<std::string> seeds = {
      save_string(sample()), R"({"a":[1,-2,3.5e-3,"\u00e9x\n",true,false,null,{}],"b":{"c":[]}})",
      R"([18446744073709551615,-9223372036854775808,18446744073709551616,1E2,-0,0.0])"};
  const std::vector<std::string> tokens = {
      "0", "-", "1.5", "e", "E+",   "\"",  "\\", "\\u00", "\\ud800",  "[",    "]",
      "{", "}", ",",   ":", "null", "tru", " ",  "\t",    "\xc3\xa9", "\xff", "\x01"};
  std::mt19937 rng(11);
  int accepted = 0, compared = 0;
  for (int i = 0; i < 6000; ++i) {
    std::string text = seeds[rng() % seeds.size()];
    for (int edits = 1 + rng() % 2; edits > 0; --edits) {
      size_t at = rng() % (text.size() + 1);
      switch (rng() % 3) {
        case 0: text.insert(at, tokens[rng() % tokens.size()]); break;
        case 1: text.erase(at, 1 + rng() % 3); break;
        default:
          if (at < text.size()) text[at] = static_cast<char>(rng());
      }
    }
    std::optional<json> oracle;
    try {
      oracle = json::parse(text);
    } catch (const json::exception&) {
    }
    std::optional<json> ours;
    try {
      ours = parse_json_text(text);
    } catch (const UserError& e) {
      ASSERT_NE(std::string(e.what()).find("at byte offset"), std::string::npos) << e.what();
      if (oracle) {
        ASSERT_NE(std::string(e.what()).find("appears twice"), std::string::npos)
            << "refused what nlohmann accepts: " << e.what() << "\n"
            << text;
      }
    }
    if (ours) {
      ASSERT_TRUE(oracle) << "accepted what nlohmann refuses: " << text;
      ASSERT_EQ(*ours, *oracle) << text;
      ASSERT_EQ(ours->dump(), oracle->dump()) << text;  // the same number kinds too
      ++accepted;
    }
    compared += oracle.has_value();
  }
  EXPECT_GT(accepted, 300);
  EXPECT_GE(compared, accepted);
}

TEST(TextFormat, StructureErrorsNameNodeTypeAndField) {
  const std::string fmt = R"("format":"tensortune.graph")";
  const std::string leaf0 = R"([{"type":"test.TextLeaf","value":1,"weight":2}])";
  expect_load_error("[]", ErrorKind::kParse, "saved graph: expected a JSON object");
  expect_load_error(R"({"format":"x","nodes":[],"root":null,"version":1})", ErrorKind::kParse,
                    "'format' must be");
  expect_load_error("{" + fmt + R"(,"nodes":[],"root":null,"version":2})", ErrorKind::kParse,
                    "version 2 is not supported");
  expect_load_error("{" + fmt + R"(,"nodes":[],"root":null,"version":"1"})", ErrorKind::kParse,
                    "missing integer 'version'");
  expect_load_error("{" + fmt + R"(,"nodes":{},"root":null,"version":1})", ErrorKind::kParse,
                    "missing array 'nodes'");
  expect_load_error("{" + fmt + R"(,"nodes":[],"version":1})", ErrorKind::kParse, "missing 'root'");
  expect_load_error("{" + fmt + R"(,"nodes":[],"root":null,"version":1,"extra":0})",
                    ErrorKind::kParse, "unknown top-level key 'extra'");
  expect_load_error("{" + fmt + ",\"nodes\":" + leaf0 + R"(,"root":1,"version":1})",
                    ErrorKind::kParse, "'root' must be a node index below 1, got 1");
  expect_load_error("{" + fmt + ",\"nodes\":" + leaf0 + R"(,"root":-1,"version":1})",
                    ErrorKind::kParse, "'root' must be a node index below 1, got -1");
  expect_load_error("{" + fmt + ",\"nodes\":" + leaf0 + R"(,"root":0.0,"version":1})",
                    ErrorKind::kParse, "'root' must be a node index below 1, got 0.0");
  expect_load_error("{" + fmt + R"(,"nodes":[[]],"root":0,"version":1})", ErrorKind::kParse,
                    "node 0: expected a JSON object");
  expect_load_error("{" + fmt + R"(,"nodes":[{"value":1}],"root":0,"version":1})",
                    ErrorKind::kParse, "node 0: missing string field 'type'");
  expect_load_error("{" + fmt + R"(,"nodes":[{"type":1}],"root":0,"version":1})", ErrorKind::kParse,
                    "node 0: missing string field 'type'");
  expect_load_error(edited(R"("type":"test.TextAll")", R"("type":"test.Nope")"),
                    ErrorKind::kNotFound, "node 2: unknown type key 'test.Nope'; known types: ");
  expect_load_error(leaf_text(R"("value":1)"), ErrorKind::kParse,
                    "node 0 (test.TextLeaf): missing field 'weight' (int)");
  expect_load_error(leaf_text(R"("value":1,"weight":2,"height":3)"), ErrorKind::kParse,
                    "node 0 (test.TextLeaf): unknown field 'height'; fields of test.TextLeaf are: "
                    "weight, value");
  expect_load_error(leaf_text(R"("value":"1","weight":2)"), ErrorKind::kTypeMismatch,
                    "node 0 (test.TextLeaf), field 'value': expected integer, got string \"1\"");
  expect_load_error(leaf_text(R"("value":1.0,"weight":2)"), ErrorKind::kTypeMismatch,
                    "node 0 (test.TextLeaf), field 'value': expected integer, got number 1.0");
  expect_load_error(leaf_text(R"("value":1e2,"weight":2)"), ErrorKind::kTypeMismatch,
                    "field 'value': expected integer, got number 100.0");
  expect_load_error(leaf_text(R"("value":9223372036854775808,"weight":2)"),
                    ErrorKind::kTypeMismatch,
                    "field 'value': integer 9223372036854775808 is out of range");
  expect_load_error(leaf_text(R"("value":18446744073709551616,"weight":2)"),
                    ErrorKind::kTypeMismatch, "field 'value': expected integer, got number");
  expect_load_error(leaf_text(R"("value":null,"weight":2)"), ErrorKind::kTypeMismatch,
                    "field 'value': expected integer, got null");
}

TEST(TextFormat, FieldErrorsNameNodeTypeAndField) {
  const std::string where = "node 3 (test.TextAll), field ";
  expect_load_error(with(3, "i8", -129), ErrorKind::kTypeMismatch,
                    where + "'i8': integer -129 is out of range");
  expect_load_error(with(3, "i8", 128), ErrorKind::kTypeMismatch,
                    where + "'i8': integer 128 is out of range");
  expect_load_error(with(3, "u64", -1), ErrorKind::kTypeMismatch,
                    where + "'u64': integer -1 is out of range");
  expect_load_error(with(3, "i32", 2147483648), ErrorKind::kTypeMismatch,
                    where + "'i32': integer 2147483648 is out of range");
  expect_load_error(with(3, "flag", 1), ErrorKind::kTypeMismatch,
                    where + "'flag': expected bool, got number 1");
  expect_load_error(with(3, "shade", "dim"), ErrorKind::kTypeMismatch,
                    where + "'shade': expected one of light|dark, got string \"dim\"");
  expect_load_error(with(3, "shade", 1), ErrorKind::kTypeMismatch,
                    where + "'shade': expected one of light|dark, got number 1");
  expect_load_error(with(3, "real", "NaN"), ErrorKind::kTypeMismatch,
                    where + "'real': expected number, got string \"NaN\"");
  expect_load_error(with(3, "real", nullptr), ErrorKind::kTypeMismatch,
                    where + "'real': expected number, got null");
  expect_load_error(with(3, "text", 7), ErrorKind::kTypeMismatch,
                    where + "'text': expected string, got number 7");
  expect_load_error(with(3, "ints", json::array({1, "two"})), ErrorKind::kTypeMismatch,
                    where + "'ints': element 1: expected integer, got string \"two\"");
  expect_load_error(with(3, "ints", json::object()), ErrorKind::kTypeMismatch,
                    where + "'ints': expected list of int, got object {}");
  expect_load_error(with(3, "reals", json::array({true})), ErrorKind::kTypeMismatch,
                    where + "'reals': element 0: expected number, got boolean true");
  expect_load_error(with(3, "point", json::array({1})), ErrorKind::kTypeMismatch,
                    where + "'point': expected a point [x, y], got [1]");
  expect_load_error(with(3, "points", json::parse("[[1,2],[1,2.5]]")), ErrorKind::kTypeMismatch,
                    where + "'points': element 1: expected a point [x, y], got [1,2.5]");
  expect_load_error(with(3, "text", "invalid"), ErrorKind::kInvalidArgument,
                    "node 3 (test.TextAll): text may not be 'invalid'");
}

TEST(TextFormat, ReferenceErrorsNameNodeTypeAndField) {
  const std::string where = "node 3 (test.TextAll), field ";
  ASSERT_EQ(save_json(sample())["nodes"][3]["next"], 2);
  expect_load_error(with(3, "next", 3), ErrorKind::kParse,
                    where + "'next': reference to node 3, which is not an earlier node");
  expect_load_error(with(3, "next", 4), ErrorKind::kParse,
                    where + "'next': reference to node 4, which is not an earlier node");
  expect_load_error(with(3, "next", -1), ErrorKind::kParse, where + "'next': reference to node -1");
  expect_load_error(with(3, "next", std::numeric_limits<uint64_t>::max()), ErrorKind::kParse,
                    where + "'next': reference to node -1");
  expect_load_error(with(3, "next", 0), ErrorKind::kTypeMismatch,
                    where + "'next': node 0 is a test.TextLeaf, which cannot be used here");
  expect_load_error(with(3, "next", "2"), ErrorKind::kTypeMismatch,
                    where + "'next': expected node reference (integer index) or null");
  expect_load_error(with(3, "next", 2.0), ErrorKind::kTypeMismatch,
                    where + "'next': expected node reference (integer index) or null");
  expect_load_error(with(2, "kids", json::array({5})), ErrorKind::kParse,
                    "node 2 (test.TextAll), field 'kids': element 0: reference to node 5, which "
                    "is not an earlier node");
  expect_load_error(with(2, "next", 0), ErrorKind::kTypeMismatch,
                    "node 2 (test.TextAll), field 'next': node 0 is a test.TextLeaf");
  // Any node fits a Ref<Object>.
  EXPECT_TRUE(paths_agree(with(2, "kids", json::array({0, 1, 0, nullptr})), /*direct=*/true));
}

TEST(TextFormat, GraphsDeeperThanTheLimitAreRejected) {
  auto chain = [](int length) {
    json node = save_json(all())["nodes"][0];
    std::string text = R"({"format":"tensortune.graph","nodes":[)";
    for (int i = 0; i < length; ++i) {
      if (i) text += ',';
      node["next"] = i ? json(i - 1) : json(nullptr);
      text += node.dump();
    }
    return text + "],\"root\":" + std::to_string(length - 1) + ",\"version\":1}";
  };
  EXPECT_TRUE(paths_agree(chain(kMaxGraphDepth), /*direct=*/true));
  expect_load_error(chain(kMaxGraphDepth + 1), ErrorKind::kParse,
                    "node 8192 (test.TextAll): graph is deeper than 8192 nodes");
}

TEST(TextFormat, MutatedTextLoadsAsTheDomPathLoadsIt) {
  // Random edits of saved graphs: wherever load_string accepts, the DOM path
  // must accept the same graph; where it rejects, with the same error.
  std::vector<std::string> seeds = {save_string(sample()), leaf_text(R"("value":1,"weight":2)")};
  const std::vector<std::string> tokens = {
      "0", "-1", "1.5",  "1e2",  "\"", "\\",       "\\u00e9",           "[", "]",      "{", "}",
      ",", ":",  "null", "true", " ",  "\"type\"", "\"test.TextLeaf\"", "3", "\"nan\""};
  std::mt19937 rng(5);
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = seeds[rng() % seeds.size()];
    for (int edits = rng() % 4 ? 1 : 2; edits > 0; --edits) {
      size_t at = rng() % (text.size() + 1);
      switch (rng() % 3) {
        case 0: text.insert(at, tokens[rng() % tokens.size()]); break;
        case 1: text.erase(at, 1 + rng() % 4); break;
        default:
          if (at < text.size()) text[at] = static_cast<char>(rng());
      }
    }
    ASSERT_TRUE(paths_agree(text));
    accepted += outcome([&] { return load_string(text); }).ok;
  }
  EXPECT_GT(accepted, 150);  // the edits must leave some loadable texts to compare
}

}  // namespace
}  // namespace tensortune
