#include "tensortune/codegen/c_codegen.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "codegen/words.h"
#include "tensortune/codegen/backend.h"
#include "tensortune/ir/expr_functor.h"
#include "tensortune/ir/pass_context.h"
#include "tensortune/ir/simplify.h"
#include "tensortune/lower/passes.h"
#include "tensortune/lower/pipeline.h"
#include "tensortune/object/structural.h"
#include "tensortune/support/strings.h"

namespace tensortune::codegen {

// The C helpers of generated code (src/codegen/c_helpers/*.c), embedded by
// cmake/embed_c_helpers.cmake.
extern const char* const c_helper_exp_f32;
extern const char* const c_helper_tanh_f32;
extern const char* const c_helper_erf_f32;
extern const char* const c_helper_thread_pool;
namespace {

using ir::BinaryOp;
using ir::Buffer;
using ir::DataType;
using ir::Expr;
using ir::Intrinsic;
using lower::ForKind;
using lower::PrimFunc;
using lower::Stmt;

/// Local arrays up to this size live on the stack...
constexpr int64_t kMaxStackBufferBytes = 64 * 1024;
/// ...as long as the allocations around them leave room within this much.
constexpr int64_t kMaxStackBytes = 256 * 1024;

// Identifiers the generated code or its headers use; user names are renamed
// away from them.
const std::set<std::string>& reserved_names() {
  static const std::set<std::string> names = {
      // C11 keywords
      "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
      "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
      "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
      "union", "unsigned", "void", "volatile", "while", "_Bool", "_Complex", "_Imaginary",
      "_Alignas", "_Alignof", "_Atomic", "_Generic", "_Noreturn", "_Static_assert", "_Thread_local",
      "asm", "typeof", "bool", "true", "false",
      // names from the headers the code includes
      "NULL", "INFINITY", "NAN", "abort", "free", "malloc", "aligned_alloc", "memcpy", "main",
      "exp", "expf", "log", "logf", "sqrt", "sqrtf", "tanh", "tanhf", "erf", "erff", "pow", "powf",
      "fabs", "fabsf", "floor", "floorf", "ceil", "ceilf", "nearbyint", "nearbyintf", "trunc",
      "truncf", "sin", "sinf", "cos", "cosf", "exp2", "exp2f", "log2", "log2f", "fmin", "fminf",
      "fmax", "fmaxf", "fmod", "fmodf", "atan", "atanf", "args", "int8_t", "int16_t", "int32_t",
      "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "size_t",
      // and from those of the thread pool (c_helpers/thread_pool.c)
      "time", "clock", "sleep", "pause", "read", "write", "close", "sync", "link", "unlink",
      "syscall", "getenv", "strcmp", "memset", "select", "fork", "pipe", "dup", "alarm", "nice"};
  return names;
}

/// A valid C identifier made of `name`: other characters become '_', and a
/// name that starts with a digit or '_', takes the generated code's "tt_"
/// prefix, or is reserved gets a prefix or suffix.
std::string sanitize(const std::string& name, const char* reserved_suffix) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0])) || out[0] == '_' ||
      starts_with(out, "tt_")) {
    out = "v" + out;
  }
  if (reserved_names().count(out)) out += reserved_suffix;
  return out;
}

bool is_power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

/// How many buffer loads `e` holds.
int reads(const Expr& e) {
  int loads = 0;
  ir::visit_pre_order(e, [&](const Expr& x) { loads += x.kind() == ir::ExprKind::kBufferLoad; });
  return loads;
}

/// Whether evaluating `e` can neither fault nor read memory, whatever its
/// variables hold: arithmetic (integers divided only by nonzero constants),
/// comparisons, logic and selects of such.
bool safe_to_evaluate_eagerly(const Expr& e) {
  bool safe = true;
  ir::visit_pre_order(e, [&](const Expr& x) {
    switch (x.kind()) {
      case ir::ExprKind::kIntImm:
      case ir::ExprKind::kFloatImm:
      case ir::ExprKind::kVar:
      case ir::ExprKind::kCompare:
      case ir::ExprKind::kLogical:
      case ir::ExprKind::kNot:
      case ir::ExprKind::kSelect:
      case ir::ExprKind::kCast: break;
      case ir::ExprKind::kBinary:
        safe = safe && !ir::may_trap(static_cast<const ir::BinaryNode&>(*x));
        break;
      default: safe = false;
    }
  });
  return safe;
}

// ---- types ----

/// Short tag of a scalar type as the code computes it ("f32", "i64"): float16
/// and bfloat16 compute in float, bool vectors are int32 masks.
std::string compute_tag(DataType t) {
  switch (t.code()) {
    case DataType::Code::kFloat: return t.bits() == 64 ? "f64" : "f32";
    case DataType::Code::kBFloat: return "f32";
    case DataType::Code::kInt: return "i" + std::to_string(t.bits());
    case DataType::Code::kUInt: return "u" + std::to_string(t.bits());
    case DataType::Code::kBool: return "i32";
  }
  return "?";
}

/// Whether `t` is float16, which is stored in half and computed in float.
bool is_float16(DataType t) { return t.code() == DataType::Code::kFloat && t.bits() == 16; }

/// Whether `t` is float64, which converts to the half types without float
/// in between (through float it would round twice).
bool is_float64(DataType t) { return t.code() == DataType::Code::kFloat && t.bits() == 64; }

/// Tag of the type a buffer element is stored as.
std::string storage_tag(DataType t) {
  if (is_float16(t)) return "f16";
  if (t.code() == DataType::Code::kBFloat) return "u16";
  if (t.is_bool()) return "u8";
  return compute_tag(t);
}

std::string c_scalar_of_tag(const std::string& tag) {
  if (tag == "f32") return "float";
  if (tag == "f64") return "double";
  if (tag == "f16") return "_Float16";
  if (tag[0] == 'i') return "int" + tag.substr(1) + "_t";
  return "uint" + tag.substr(1) + "_t";
}

int bytes_of_tag(const std::string& tag) { return std::stoi(tag.substr(1)) / 8; }

/// The C type a scalar value of `t` is computed in.
std::string c_scalar_type(DataType t) {
  if (t.is_bool()) return "int";
  return c_scalar_of_tag(compute_tag(t));
}

/// The C type a buffer of `t` stores its elements as.
std::string c_storage_type(DataType t) { return c_scalar_of_tag(storage_tag(t)); }

std::string format_float(double v, DataType t) {
  bool is_double = is_float64(t);
  if (std::isnan(v)) return is_double ? "((double)NAN)" : "NAN";
  if (std::isinf(v)) {
    std::string inf = is_double ? "((double)INFINITY)" : "INFINITY";
    return v < 0 ? "(-" + inf + ")" : inf;
  }
  char buf[64];
  auto res = is_double ? std::to_chars(buf, buf + sizeof buf, v)
                       : std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  std::string text(buf, res.ptr);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  if (!is_double) text += "f";
  return v < 0 || (v == 0 && std::signbit(v)) ? "(" + text + ")" : text;
}

std::string format_int(int64_t v, DataType t) {
  int bits = t.bits();
  if (t.is_bool()) return v ? "1" : "0";
  if (t.is_uint()) {
    uint64_t u = static_cast<uint64_t>(v);
    if (bits == 64) return "UINT64_C(" + std::to_string(u) + ")";
    if (bits == 32) return std::to_string(u) + "u";
    return "((" + c_scalar_type(t) + ")" + std::to_string(u) + ")";
  }
  if (bits == 64) {
    if (v == std::numeric_limits<int64_t>::min()) return "INT64_MIN";
    // Small values read better bare; C's conversions widen them where they meet int64_t.
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
      return "INT64_C(" + std::to_string(v) + ")";
    }
  }
  std::string text = v == std::numeric_limits<int32_t>::min() ? "(-2147483647 - 1)"
                     : v < 0                                  ? "(" + std::to_string(v) + ")"
                                                              : std::to_string(v);
  if (bits >= 32) return text;
  return "((" + c_scalar_type(t) + ")" + text + ")";
}

/// A name for `op` in helper functions' names.
const char* compare_word(ir::CompareOp op) {
  switch (op) {
    case ir::CompareOp::kEQ: return "eq";
    case ir::CompareOp::kNE: return "ne";
    case ir::CompareOp::kLT: return "lt";
    case ir::CompareOp::kLE: return "le";
    case ir::CompareOp::kGT: return "gt";
    case ir::CompareOp::kGE: return "ge";
  }
  return "?";
}

const char* intrinsic_name(Intrinsic op) {
  switch (op) {
    case Intrinsic::kExp: return "exp";
    case Intrinsic::kLog: return "log";
    case Intrinsic::kSqrt: return "sqrt";
    case Intrinsic::kRsqrt: return "sqrt";
    case Intrinsic::kTanh: return "tanh";
    case Intrinsic::kErf: return "erf";
    case Intrinsic::kSigmoid: return "exp";
    case Intrinsic::kPow: return "pow";
    case Intrinsic::kFabs: return "fabs";
    case Intrinsic::kFloor: return "floor";
    case Intrinsic::kCeil: return "ceil";
    case Intrinsic::kRound: return "nearbyint";  // ties to even, as the IR rounds
    case Intrinsic::kTrunc: return "trunc";
    case Intrinsic::kSin: return "sin";
    case Intrinsic::kCos: return "cos";
    case Intrinsic::kExp2: return "exp2";
    case Intrinsic::kLog2: return "log2";
    case Intrinsic::kAtan: return "atan";
    case Intrinsic::kDot4U8S8: return "tt_dot4_u8s8";
  }
  return "?";
}

/// The C precedence level (as in the C grammar, 3 for * up to 12 for ||) of
/// the operator the code of `e` has at its top, or 0 when that code is a
/// primary expression (a call, a cast, a load, or a parenthesized form that
/// must stay so).
int binary_precedence(const ir::BinaryNode& b) {
  // Narrow scalar integers are wrapped in a cast (see FunctionEmitter::binary).
  if (b.dtype.is_integer() && b.dtype.bits() < 32 && b.dtype.is_scalar()) return 0;
  switch (b.op) {
    case BinaryOp::kAdd:
    case BinaryOp::kSub: return 4;
    case BinaryOp::kMul:
    case BinaryOp::kDiv: return 3;
    case BinaryOp::kMod: return b.dtype.is_integer() ? 3 : 0;
    default: return 0;
  }
}

int infix_precedence(const Expr& e) {
  if (e->kind() == ir::ExprKind::kBinary) {
    return binary_precedence(static_cast<const ir::BinaryNode&>(*e));
  }
  if (!e.dtype().is_scalar()) return 0;
  if (e->kind() == ir::ExprKind::kCompare) {
    auto op = static_cast<const ir::CompareNode&>(*e).op;
    return op == ir::CompareOp::kEQ || op == ir::CompareOp::kNE ? 7 : 6;
  }
  if (e->kind() == ir::ExprKind::kLogical) {
    return static_cast<const ir::LogicalNode&>(*e).op == ir::LogicalOp::kAnd ? 11 : 12;
  }
  return 0;
}

/// Everything generate_c emits before the kernels: typedefs and helpers,
/// each once, in a stable order.
class Prelude {
 public:
  /// Name of the vector type of `lanes` lanes of `tag`, declaring it.
  std::string vector_type(const std::string& tag, int lanes) {
    std::string name = "tt_" + tag + "x" + std::to_string(lanes);
    int bytes = bytes_of_tag(tag) * lanes;
    add(typedefs_, name,
        "typedef " + c_scalar_of_tag(tag) + " " + name + " __attribute__((vector_size(" +
            std::to_string(bytes) + ")));");
    return name;
  }
  /// Name of the unaligned, may-alias variant for loads and stores.
  std::string unaligned_vector_type(const std::string& tag, int lanes) {
    std::string name = "tt_" + tag + "x" + std::to_string(lanes) + "_u";
    int bytes = bytes_of_tag(tag) * lanes;
    add(typedefs_, name,
        "typedef " + c_scalar_of_tag(tag) + " " + name + " __attribute__((vector_size(" +
            std::to_string(bytes) + "), aligned(" + std::to_string(bytes_of_tag(tag)) +
            "), may_alias));");
    return name;
  }
  /// Name of the function that replicates a scalar of `tag` into `lanes` lanes.
  std::string broadcast(const std::string& tag, int lanes) {
    std::string type = vector_type(tag, lanes);
    std::string name = "tt_broadcast_" + tag + "x" + std::to_string(lanes);
    std::string list;
    for (int l = 0; l < lanes; ++l) list += l ? ", x" : "x";
    add(helpers_, name,
        "static inline " + type + " " + name + "(" + c_scalar_of_tag(tag) + " x) {\n  " + type +
            " v = {" + list + "};\n  return v;\n}");
    return name;
  }
  /// Name of the scalar floordiv or floormod helper for signed integer `tag`.
  std::string floor_div_mod(const std::string& tag, bool mod) {
    std::string type = c_scalar_of_tag(tag);
    std::string name = std::string(mod ? "tt_floormod_" : "tt_floordiv_") + tag;
    std::string adjust = "((r != 0) & ((r < 0) != (b < 0)))";  // no branch: see LogicalNode
    std::string body = mod ? "  " + type + " r = (" + type + ")(a % b);\n  return (" + type + ")(" +
                                 adjust + " ? r + b : r);"
                           : "  " + type + " q = (" + type + ")(a / b), r = (" + type +
                                 ")(a % b);\n  return (" + type + ")(" + adjust + " ? q - 1 : q);";
    add(helpers_, name,
        "static inline " + type + " " + name + "(" + type + " a, " + type + " b) {\n" + body +
            "\n}");
    return name;
  }
  /// Name of the scalar min or max helper for `tag`. Floats take fmax's
  /// rule (where b is NaN, a is taken: NaN only if both are), inline: GCC
  /// calls fmaxf from the library, through the PLT, wherever a loop does
  /// not vectorize.
  std::string scalar_min_max(const std::string& tag, bool max) {
    std::string type = c_scalar_of_tag(tag);
    std::string name = std::string(max ? "tt_max_" : "tt_min_") + tag;
    const std::string nan_b = tag[0] == 'f' ? " || b != b" : "";
    add(helpers_, name,
        "static inline " + type + " " + name + "(" + type + " a, " + type + " b) { return a " +
            (max ? ">" : "<") + " b" + nan_b + " ? a : b; }");
    return name;
  }
  /// Name of the lane-by-lane comparison `op` of two `lanes`-lane vectors of
  /// `tag`, giving 0 / -1 lanes of the same width. GCC 12 splits vector
  /// comparisons wider than the machine's registers into one scalar compare
  /// per lane; written as a loop over the lanes, they become one vector
  /// compare per register.
  std::string wide_compare(const std::string& tag, int lanes, ir::CompareOp compare) {
    std::string type = vector_type(tag, lanes);
    std::string bits = vector_type("i" + tag.substr(1), lanes);
    std::string op(ir::op_name(compare));
    std::string name =
        std::string("tt_") + compare_word(compare) + "_" + tag + "x" + std::to_string(lanes);
    add(helpers_, name,
        "static inline " + bits + " " + name + "(" + type + " a, " + type + " b) {\n  " + bits +
            " r;\n  for (int l = 0; l < " + std::to_string(lanes) + "; ++l) r[l] = -(a[l] " + op +
            " b[l]);\n  return r;\n}");
    return name;
  }
  /// Name of the lane-by-lane min or max of two `lanes`-lane vectors of
  /// `tag` (for floats with fmin/fmax's NaN rule), for the same reason.
  std::string wide_min_max(const std::string& tag, int lanes, bool max) {
    std::string type = vector_type(tag, lanes);
    std::string name =
        std::string(max ? "tt_vmax_" : "tt_vmin_") + tag + "x" + std::to_string(lanes);
    std::string pick_a = std::string("a[l] ") + (max ? ">" : "<") + " b[l]";
    if (tag[0] == 'f') pick_a += " || b[l] != b[l]";
    add(helpers_, name,
        "static inline " + type + " " + name + "(" + type + " a, " + type + " b) {\n  " + type +
            " r;\n  for (int l = 0; l < " + std::to_string(lanes) + "; ++l) r[l] = (" + pick_a +
            ") ? a[l] : b[l];\n  return r;\n}");
    return name;
  }
  /// Name of a float exp, erf or tanh in plain arithmetic (within a few ulp),
  /// which GCC vectorizes inside the lane loops of vector code; math.h's
  /// expf, erff and tanhf are calls it cannot. The definitions are C files
  /// (src/codegen/c_helpers/), embedded at build time.
  std::string vectorizable_f32(Intrinsic op) {
    if (op == Intrinsic::kExp) {
      add(helpers_, "tt_exp_f32", c_helper_exp_f32);
      return "tt_exp_f32";
    }
    if (op == Intrinsic::kTanh) {
      vectorizable_f32(Intrinsic::kExp);  // tanh's definition calls it
      add(helpers_, "tt_tanh_f32", c_helper_tanh_f32);
      return "tt_tanh_f32";
    }
    TT_ICHECK(op == Intrinsic::kErf, "no vectorizable form of ", intrinsic_name(op));
    add(helpers_, "tt_erf_f32", c_helper_erf_f32);
    return "tt_erf_f32";
  }
  /// Name of e^x over a vector of `lanes` floats where the target has
  /// AVX-512 (for 8 lanes, with VL): tt_exp_f32's reduction and polynomial
  /// in 13 instructions, where GCC's vectorization of the scalar form takes
  /// 22. n is rounded by the fused multiply-add of 1.5 * 2^23, which rounds
  /// once (vrndscaleps is two micro-ops and a multiply before it); the
  /// polynomial is in Horner's form down to its constant; 2^n is one
  /// vscalefps, which needs neither the scalar form's two-step power of two
  /// nor its NaN select (a NaN passes every step). Elsewhere the scalar form
  /// lane by lane.
  std::string vector_exp_f32(int lanes) {
    std::string type = vector_type("f32", lanes);
    std::string name = "tt_exp_f32x" + std::to_string(lanes);
    vectorizable_f32(Intrinsic::kExp);
    std::string per_lane = "  " + type + " r = v;\n  for (int l = 0; l < " + std::to_string(lanes) +
                           "; ++l) r[l] = tt_exp_f32(r[l]);\n  return r;\n";
    std::string body;
    if (lanes == 16 || lanes == 8) {
      const std::string p = lanes == 16 ? "_mm512" : "_mm256";
      const std::string v = lanes == 16 ? "__m512" : "__m256";
      const std::string isa =
          lanes == 16 ? "defined(__AVX512F__)" : "defined(__AVX512F__) && defined(__AVX512VL__)";
      auto c = [&](const char* x) { return p + "_set1_ps(" + x + ")"; };
      // Clamped to +-104 as the scalar form is (min and max return their
      // second operand, x, when it is a NaN, which then passes through).
      body = "#if " + isa + "\n  " + v + " x = " + p + "_max_ps(" + c("-104.0f") + ", " + p +
             "_min_ps(" + c("104.0f") + ", (" + v + ")v));\n  " + v + " n = " + p + "_sub_ps(" + p +
             "_fmadd_ps(x, " + c("1.44269504f") + ", " + c("12582912.0f") + "), " +
             c("12582912.0f") + ");\n  " + v + " r = " + p + "_fmadd_ps(n, " + c("2.12194440e-4f") +
             ", " + p + "_fnmadd_ps(n, " + c("0.693359375f") + ", x));\n  " + v +
             " q = " + c("1.39336509e-3f") + ";\n";
      for (const char* k :
           {"8.36318173e-3f", "4.16664667e-2f", "1.66665763e-1f", "0.5f", "1.0f", "1.0f"}) {
        body += "  q = " + p + "_fmadd_ps(q, r, " + c(k) + ");\n";
      }
      body += "  return (" + type + ")" + p + "_scalef_ps(q, n);\n#else\n" + per_lane + "#endif\n";
    } else {
      body = per_lane;
    }
    add(helpers_, name,
        "#if defined(__x86_64__) || defined(__i386__)\n#include <immintrin.h>\n#endif\n"
        "static inline " +
            type + " " + name + "(" + type + " v) {\n" + body + "}");
    return name;
  }
  /// Name of `acc` plus dot4_u8s8 of `a` and `b` over `lanes` int32 lanes
  /// (1: scalar). One VNNI instruction where the target has it; else each
  /// word's even and odd bytes widened to 16 bits and multiplied in pairs
  /// (pmaddwd), which is exact; lanes that fit no register, one by one.
  std::string dot4_u8s8(int lanes) {
    if (lanes == 1) {
      add(helpers_, "tt_dot4_u8s8",
          "static inline int32_t tt_dot4_u8s8(int32_t acc, int32_t a, int32_t b) {\n"
          "  uint32_t ua = (uint32_t)a, ub = (uint32_t)b;\n"
          "  for (int k = 0; k < 32; k += 8)\n"
          "    acc += (int32_t)((ua >> k) & 0xffu) * (int32_t)(int8_t)(uint8_t)((ub >> k) & "
          "0xffu);\n"
          "  return acc;\n"
          "}");
      return "tt_dot4_u8s8";
    }
    std::string type = vector_type("i32", lanes);
    std::string name = "tt_dot4_u8s8_i32x" + std::to_string(lanes);
    // Per register width: the VNNI forms, then the pmaddwd form and its ISA.
    struct Form {
      const char* vnni;
      const char* madd_isa;
      const char* p;   // intrinsic prefix
      const char* v;   // register type
      const char* si;  // and/or suffix
    };
    std::optional<Form> form;
    if (lanes == 16)
      form = Form{"defined(__AVX512VNNI__)", "defined(__AVX512BW__)", "_mm512", "__m512i", "si512"};
    if (lanes == 8)
      form = Form{"defined(__AVX512VNNI__) && defined(__AVX512VL__)", "defined(__AVX2__)", "_mm256",
                  "__m256i", "si256"};
    if (lanes == 4)
      form = Form{"defined(__AVX512VNNI__) && defined(__AVX512VL__)", "defined(__SSE2__)", "_mm",
                  "__m128i", "si128"};
    std::string per_lane = "  " + type + " r;\n  for (int l = 0; l < " + std::to_string(lanes) +
                           "; ++l) r[l] = tt_dot4_u8s8(acc[l], a[l], b[l]);\n  return r;\n";
    dot4_u8s8(1);
    std::string body;
    if (!form) {
      body = per_lane;
    } else {
      std::string p = form->p, v = form->v;
      const std::string cast = "(" + v + ")";
      body = std::string("#if ") + form->vnni + "\n  return (" + type + ")" + p + "_dpbusd_epi32(" +
             cast + "acc, " + cast + "a, " + cast + "b);\n";
      if (lanes != 16) {
        body += "#elif defined(__AVXVNNI__)\n  return (" + type + ")" + p + "_dpbusd_avx_epi32(" +
                cast + "acc, " + cast + "a, " + cast + "b);\n";
      }
      body += std::string("#elif ") + form->madd_isa + "\n  " + v + " lo = " + p +
              "_set1_epi16(0x00ff), wa = " + cast + "a, wb = " + cast + "b;\n  " + v +
              " even = " + p + "_madd_epi16(" + p + "_and_" + form->si + "(wa, lo), " + p +
              "_srai_epi16(" + p + "_slli_epi16(wb, 8), 8));\n  " + v + " odd = " + p +
              "_madd_epi16(" + p + "_srli_epi16(wa, 8), " + p +
              "_srai_epi16(wb, 8));\n  return acc + (" + type + ")even + (" + type +
              ")odd;\n#else\n" + per_lane + "#endif\n";
    }
    add(helpers_, name,
        "#if defined(__x86_64__) || defined(__i386__)\n#include <immintrin.h>\n#endif\n"
        "static inline " +
            type + " " + name + "(" + type + " acc, " + type + " a, " + type + " b) {\n" + body +
            "}");
    return name;
  }
  /// Name of the conversion of a float32 scalar to float16 (`to_half`) or
  /// back, by F16C's vector instruction where the target has it: GCC's
  /// scalar one (AVX512-FP16's vcvtsh2ss) keeps the rest of its register,
  /// which chains each conversion to the last; 5x slower in a strided loop.
  std::string half_scalar_conversion(bool to_half) {
    const std::string name = to_half ? "tt_f32_to_f16" : "tt_f16_to_f32";
    const std::string body =
        to_half
            ? "static inline _Float16 tt_f32_to_f16(float f) {\n#if defined(__F16C__)\n"
              "  unsigned short u = _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);\n"
              "  _Float16 h;\n  __builtin_memcpy(&h, &u, sizeof h);\n  return h;\n#else\n"
              "  return (_Float16)f;\n#endif\n}"
            : "static inline float tt_f16_to_f32(_Float16 h) {\n#if defined(__F16C__)\n"
              "  unsigned short u;\n  __builtin_memcpy(&u, &h, sizeof u);\n"
              "  return _cvtsh_ss(u);\n#else\n  return (float)h;\n#endif\n}";
    add(helpers_, name,
        "#if defined(__x86_64__) || defined(__i386__)\n#include <immintrin.h>\n#endif\n" + body);
    return name;
  }
  /// Name of the conversion of `lanes` float32 lanes to float16 (`to_half`)
  /// or back: one instruction per register where the target has it
  /// (AVX-512F: 16 lanes at a time; F16C: 8, or 4). GCC 12 converts
  /// _Float16 vectors lane by lane in scalar code, which made every float16
  /// epilogue several times slower.
  std::string half_conversion(int lanes, bool to_half) {
    const std::string f32 = vector_type("f32", lanes), f16 = vector_type("f16", lanes);
    const std::string name =
        std::string(to_half ? "tt_f32_to_f16x" : "tt_f16_to_f32x") + std::to_string(lanes);
    const std::string from = to_half ? f32 : f16, to = to_half ? f16 : f32;
    // Round to nearest even, as C's conversion does, and raise nothing.
    const std::string nearest = "_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC";
    // Register by register, `chunk` lanes of float32 in `wide`, of half in
    // `narrow`, by memcpy: one register's worth stays in registers; more
    // go through the stack, still far faster than lane by lane.
    auto by_registers = [&](int chunk, const std::string& wide, const std::string& narrow,
                            const std::string& intrinsic_prefix) {
      const std::string parts = std::to_string(lanes / chunk);
      const std::string in = to_half ? wide : narrow, out = to_half ? narrow : wide;
      const std::string convert = to_half ? intrinsic_prefix + "_cvtps_ph(x, " + nearest + ")"
                                          : intrinsic_prefix + "_cvtph_ps(x)";
      return "  " + to + " r;\n  for (int c = 0; c < " + parts + "; ++c) {\n    " + in +
             " x;\n    __builtin_memcpy(&x, (const char*)&v + c * sizeof x, sizeof x);\n    " +
             out + " y = " + convert +
             ";\n    __builtin_memcpy((char*)&r + c * sizeof y, &y, sizeof y);\n" +
             "  }\n  return r;\n";
    };
    // The forms this target may have, best first (the macros are x86's).
    std::vector<std::pair<std::string, std::string>> forms;
    if (lanes % 16 == 0) {
      forms.emplace_back("__AVX512F__", by_registers(16, "__m512", "__m256i", "_mm512"));
    }
    if (lanes % 8 == 0) {
      forms.emplace_back("__F16C__", by_registers(8, "__m256", "__m128i", "_mm256"));
    }
    if (lanes == 4) {
      // Four halves are half a register.
      forms.emplace_back(
          "__F16C__", to_half ? "  __m128i h = _mm_cvtps_ph((__m128)v, " + nearest + ");\n  " + to +
                                    " r;\n  __builtin_memcpy(&r, &h, sizeof r);\n  return r;\n"
                              : "  __m128i h = _mm_setzero_si128();\n"
                                "  __builtin_memcpy(&h, &v, sizeof v);\n  return (" +
                                    to + ")_mm_cvtph_ps(h);\n");
    }
    const std::string generic = "  return __builtin_convertvector(v, " + to + ");\n";
    std::string body;
    for (size_t i = 0; i < forms.size(); ++i) {
      body += (i ? "#elif defined(" : "#if defined(") + forms[i].first + ")\n" + forms[i].second;
    }
    body += forms.empty() ? generic : "#else\n" + generic + "#endif\n";
    add(helpers_, name,
        "#if defined(__x86_64__) || defined(__i386__)\n#include <immintrin.h>\n#endif\n"
        "static inline " +
            to + " " + name + "(" + from + " v) {\n" + body + "}");
    return name;
  }
  /// Declares the bfloat16 conversions tt_bf16_to_f32, tt_f32_to_bf16 and tt_bf16_round.
  void bfloat16() {
    add(helpers_, "tt_bf16",
        "static inline float tt_bf16_to_f32(uint16_t b) {\n"
        "  uint32_t bits = (uint32_t)b << 16;\n"
        "  float f;\n"
        "  __builtin_memcpy(&f, &bits, sizeof f);\n"
        "  return f;\n"
        "}\n"
        "static inline uint16_t tt_f32_to_bf16(float f) {\n"
        "  uint32_t bits;\n"
        "  __builtin_memcpy(&bits, &f, sizeof bits);\n"
        "  if (f != f) return (uint16_t)((bits >> 16) | 0x40u);  /* NaN stays NaN */\n"
        "  bits += 0x7fffu + ((bits >> 16) & 1u);  /* round to nearest-even */\n"
        "  return (uint16_t)(bits >> 16);\n"
        "}\n"
        "static inline float tt_bf16_round(float f) { return tt_bf16_to_f32(tt_f32_to_bf16(f)); }");
  }
  /// Declares tt_f64_bf16_round: float64 to bfloat16 (as float) in one
  /// rounding. Through float it would round twice; rounded to odd instead
  /// (truncated, the last bit set when inexact), float keeps what deciding
  /// bfloat16's nearest-even needs.
  void bfloat16_from_double() {
    bfloat16();
    add(helpers_, "tt_f64_bf16",
        "static inline float tt_f64_bf16_round(double d) {\n"
        "  float f = (float)d;\n"
        "  if (d != d || (double)f == d) return tt_bf16_round(f);\n"
        "  uint32_t bits;\n"
        "  __builtin_memcpy(&bits, &f, sizeof bits);\n"
        "  if (__builtin_fabs((double)f) > __builtin_fabs(d)) bits -= 1; /* toward zero */\n"
        "  bits |= 1u;\n"
        "  __builtin_memcpy(&f, &bits, sizeof f);\n"
        "  return tt_bf16_round(f);\n"
        "}");
  }
  /// Declares tt_alloc (aligned heap memory that aborts, saying how much it
  /// wanted, when memory runs out: a run worker caps its address space, and
  /// a schedule may ask for a scratch buffer far larger than its tensors).
  void heap_alloc(int64_t alignment) {
    std::string a = std::to_string(alignment);
    add(helpers_, "tt_alloc",
        "static inline void* tt_alloc(size_t bytes) {\n"
        "  /* aligned_alloc wants a multiple of the alignment */\n"
        "  void* p = aligned_alloc(" +
            a + ", (bytes + " + a + " - 1) / " + a + " * " + a +
            ");\n"
            "  if (p == NULL) {\n"
            "    fprintf(stderr, \"tensortune kernel: out of memory allocating a buffer of %zu "
            "bytes\\n\", bytes);\n"
            "    abort();\n"
            "  }\n"
            "  return p;\n"
            "}");
  }

  std::string text() const {
    std::string out;
    for (const auto& [name, def] : typedefs_) out += def + "\n";
    if (!typedefs_.empty()) out += "\n";
    for (const auto& [name, def] : helpers_) out += def + "\n\n";
    return out;
  }

 private:
  static void add(std::map<std::string, std::string>& into, const std::string& name,
                  const std::string& def) {
    into.emplace(name, def);
  }
  std::map<std::string, std::string> typedefs_;
  std::map<std::string, std::string> helpers_;
};

/// Emits one kernel.
class FunctionEmitter {
 public:
  FunctionEmitter(Prelude& prelude, const PrimFunc& f, int64_t num_cores, int64_t align,
                  int64_t vector_bytes)
      : prelude_(prelude),
        func_(f),
        num_cores_(num_cores),
        align_(align),
        vector_bytes_(vector_bytes) {}

  std::string emit() {
    const auto& f = *func_;
    std::set<const ir::BufferNode*> stored;
    lower::visit_stmts(f.body, [&](const Stmt& s) {
      if (s->kind() == lower::StmtKind::kBufferStore) {
        stored.insert(static_cast<const lower::BufferStoreNode&>(*s).buffer.get());
      }
    });
    // The body is a function of its own whose buffers are restrict
    // parameters: GCC takes restrict into account for parameters, not for
    // local pointers, and without it cannot keep an accumulator in a register
    // across loads of another buffer. The exported function unpacks args.
    std::string symbol = c_function_name(f.name);
    symbol_ = symbol;
    std::vector<std::string> params, casts;
    for (size_t i = 0; i < f.params.size(); ++i) {
      const auto& b = f.params[i];
      std::string name = fresh_name(b->name);
      // Inputs the kernel never writes are const: the compiler may then keep them in registers.
      bool read_only = static_cast<int>(i) < f.num_inputs && !stored.count(b.get());
      std::string type = std::string(read_only ? "const " : "") + c_storage_type(b->dtype);
      params.push_back(type + "* restrict " + name);
      casts.push_back("(" + type + "*)args[" + std::to_string(i) + "]");
      if (read_only) read_only_.insert(b.get());
      buffers_.emplace_back(b, name);
    }
    emit_stmt(f.body, 1, true);
    std::string body_name = "tt_kernel_" + symbol;
    // One argument per line when they do not fit on one.
    auto arguments = [](const std::vector<std::string>& list, const std::string& head) {
      std::string one_line = head + "(" + join(list, ", ") + ")";
      return one_line.size() <= 96 ? one_line : head + "(\n    " + join(list, ",\n    ") + ")";
    };
    std::string call = arguments(casts, body_name);
    return outlined_.str() + "static int32_t " + arguments(params, body_name) + " {\n" +
           body_.str() + "  return 0;\n}\n\nint32_t " + symbol + "(void** args) {\n" + "  return " +
           call + ";\n}\n";
  }

 private:
  [[noreturn]] void unsupported(const std::string& what) const {
    fail(ErrorKind::kInvalidArgument, "cannot generate C for function '", func_->name, "': ", what);
  }

  std::string fresh_name(const std::string& base) {
    std::string name = sanitize(base, "_v");
    std::string candidate = name;
    for (int k = 1; used_names_.count(candidate); ++k) candidate = name + "_" + std::to_string(k);
    used_names_.insert(candidate);
    return candidate;
  }

  std::string buffer_name(const Buffer& b) const {
    for (auto it = buffers_.rbegin(); it != buffers_.rend(); ++it) {
      if (it->first.same_as(b)) return it->second;
    }
    // Structure, not identity (docs/architecture.md invariant 3): an equal buffer node is the same
    // buffer.
    for (auto it = buffers_.rbegin(); it != buffers_.rend(); ++it) {
      if (structural_equal(it->first, b)) return it->second;
    }
    unsupported("buffer '" + b->name + "' is used outside its allocation");
  }

  std::string var_name(const ir::VarNode& v) const {
    auto it = vars_.find(&v);
    if (it == vars_.end()) unsupported("variable '" + v.name + "' is used outside its scope");
    return it->second;
  }

  void line(int indent, const std::string& text) {
    body_ << std::string(2 * indent, ' ') << text << "\n";
  }

  // ---- statements ----

  /// `tail`: nothing follows `s` in its C block, so declarations need no block of their own.
  void emit_stmt(const Stmt& s, int indent, bool tail) {
    lower::dispatch(s, [&](const auto& n) {
      using N = std::decay_t<decltype(n)>;
      if constexpr (std::is_same_v<N, lower::ForNode>) {
        emit_for(n, indent);
      } else if constexpr (std::is_same_v<N, lower::IfThenElseNode>) {
        line(indent, "if (" + strip_parens(expr(n.condition)) + ") {");
        emit_stmt(n.then_case, indent + 1, true);
        if (n.else_case) {
          line(indent, "} else {");
          emit_stmt(n.else_case, indent + 1, true);
        }
        line(indent, "}");
      } else if constexpr (std::is_same_v<N, lower::AllocateNode>) {
        emit_allocate(n, indent, tail);
      } else if constexpr (std::is_same_v<N, lower::BufferStoreNode>) {
        emit_store(n, indent);
      } else if constexpr (std::is_same_v<N, lower::SeqNode>) {
        for (size_t i = 0; i < n.stmts.size(); ++i) {
          emit_stmt(n.stmts[i], indent, tail && i + 1 == n.stmts.size());
        }
      } else if constexpr (std::is_same_v<N, lower::LetStmtNode>) {
        std::string name = fresh_name(n.var->name);
        line(indent, "const " + c_type(n.var->dtype) + " " + name + " = " +
                         strip_parens(expr(n.value)) + ";");
        vars_[n.var.get()] = name;
        emit_stmt(n.body, indent, tail);
        vars_.erase(n.var.get());
      } else {
        // Every statement kind is handled above: a new one fails to compile here.
        static_assert(std::is_same_v<N, lower::EvaluateNode>,
                      "emit_stmt: unhandled statement kind");
        line(indent, "(void)" + expr(n.value) + ";");
      }
    });
  }

  void emit_for(const lower::ForNode& n, int indent) {
    if (!n.loop_var->dtype.is_scalar()) unsupported("vector loop variable " + n.loop_var->name);
    // An int32 loop variable is declared 64 bits wide: the index arithmetic
    // on it then never wraps under -fwrapv, so GCC can step pointers instead
    // of sign-extending every int32 sum (seven instructions in a 6x16
    // register tile's loop of twelve FMAs). Lowering uses int32 indices only
    // for buffers of fewer than 2^31 elements, where the sums stay in range
    // and both widths give the same values.
    const bool wide = n.loop_var->dtype == DataType::int32();
    std::string type = wide ? "int64_t" : c_scalar_type(n.loop_var->dtype);
    if (wide) wide_loop_vars_.insert(n.loop_var.get());
    std::string name = fresh_name(n.loop_var->name);
    std::string min = strip_parens(expr(n.min));
    // A parallel loop inside a parallel one would only oversubscribe the
    // cores, and inside a simd loop it cannot be split.
    bool simd_region = false;
    switch (n.for_kind) {
      case ForKind::kParallel:
        if (in_parallel_ || in_simd_) {
          line(indent, "/* parallel loop inside a parallel or simd loop: runs serially */");
        } else if (num_cores_ > 1) {
          emit_parallel_loop(n, indent, type, name, min);
          return;
        } else {
          line(indent, "/* parallel loop: the target has one core */");
        }
        break;
      case ForKind::kVectorized:
        if (!in_simd_) {
          line(indent, "#pragma omp simd");
          simd_region = true;
        }
        break;
      case ForKind::kUnrolled: {
        line(indent, "#pragma GCC unroll " + std::to_string(lower::unroll_hint_factor(n.extent)));
        break;
      }
      case ForKind::kSerial: break;
    }
    auto min_const = ir::as_const_int(n.min);
    std::string end = strip_parens(
        expr(min_const && *min_const == 0 ? n.extent : ir::simplify(n.min + n.extent)));
    line(indent, "for (" + type + " " + name + " = " + min + "; " + name + " < " + end + "; ++" +
                     name + ") {");
    vars_[n.loop_var.get()] = name;
    if (simd_region) in_simd_ = true;
    emit_stmt(n.body, indent + 1, true);
    if (simd_region) in_simd_ = false;
    vars_.erase(n.loop_var.get());
    line(indent, "}");
  }

  // A parallel loop runs on the library's threads (c_helpers/thread_pool.c):
  // its body becomes a function of the iteration and of what the body uses,
  // called over a range of iterations by tt_parallel_for. As parameters of
  // that function the buffers keep restrict, which GCC's own outlining of an
  // OpenMP region (a struct of plain pointers) loses, and with it the
  // accumulators kept in registers.
  void emit_parallel_loop(const lower::ForNode& n, int indent, const std::string& type,
                          const std::string& var, const std::string& min) {
    std::vector<std::string> params, args;
    std::set<const Object*> seen;
    auto use_var = [&](const ir::VarNode& v) {
      if (!vars_.count(&v) || !seen.insert(&v).second) return;
      params.push_back((wide_loop_vars_.count(&v) ? "int64_t" : c_type(v.dtype)) + " " +
                       vars_.at(&v));
      args.push_back(vars_.at(&v));
    };
    auto use_buffer = [&](const Buffer& b) {
      for (auto it = buffers_.rbegin(); it != buffers_.rend(); ++it) {
        if (!it->first.same_as(b) && !structural_equal(it->first, b)) continue;
        if (!seen.insert(it->first.get()).second) return;
        bool read_only = read_only_.count(it->first.get()) > 0;
        params.push_back(std::string(read_only ? "const " : "") + c_storage_type(b->dtype) +
                         "* restrict " + it->second);
        args.push_back(it->second);
        return;
      }
    };
    vars_[n.loop_var.get()] = var;
    seen.insert(n.loop_var.get());
    lower::visit_stmts(n.body, [&](const Stmt& st) {
      if (st->kind() == lower::StmtKind::kBufferStore) {
        use_buffer(static_cast<const lower::BufferStoreNode&>(*st).buffer);
      }
    });
    lower::visit_stmt_exprs(n.body, [&](const Expr& e) {
      ir::visit_pre_order(e, [&](const Expr& x) {
        if (x->kind() == ir::ExprKind::kVar) use_var(static_cast<const ir::VarNode&>(*x));
        if (x->kind() == ir::ExprKind::kBufferLoad) {
          use_buffer(static_cast<const ir::BufferLoadNode&>(*x).buffer);
        }
      });
    });
    const std::string fn = fresh_name("tt_parallel_" + symbol_);
    const std::string fn_args = fresh_name(fn + "_args"), fn_range = fresh_name(fn + "_range"),
                      fn_a = fresh_name(fn + "_a");
    const std::string count = strip_parens(expr(n.extent));
    std::ostringstream saved;
    saved << body_.str();
    body_.str("");
    int64_t saved_stack = stack_bytes_;
    stack_bytes_ = 0;
    in_parallel_ = true;
    emit_stmt(n.body, 1, true);
    in_parallel_ = false;
    stack_bytes_ = saved_stack;
    vars_.erase(n.loop_var.get());
    // noinline: the body stays a function of restrict parameters.
    std::vector<std::string> body_params = {type + " " + var};
    body_params.insert(body_params.end(), params.begin(), params.end());
    outlined_ << "static __attribute__((noinline)) void " << fn << "(" << join(body_params, ", ")
              << ") {\n"
              << body_.str() << "}\n\n";
    // What the body uses, and where the loop starts, as one struct the
    // threads read; each thread calls the body over its ranges.
    std::string fields, unpack;
    for (size_t i = 0; i < params.size(); ++i) {
      fields += "  " + params[i] + ";\n";
      unpack += ", a->" + args[i];
    }
    outlined_ << "struct " << fn_args << " {\n"
              << fields << "  int64_t tt_first;\n};\n\n"
              << "static void " << fn_range << "(void* p, int64_t begin, int64_t end) {\n"
              << "  const struct " << fn_args << "* a = (const struct " << fn_args << "*)p;\n"
              << "  for (int64_t i = begin; i < end; ++i) " << fn << "((" << type
              << ")(a->tt_first + i)" << unpack << ");\n}\n\n";
    body_.str("");
    body_ << saved.str();
    args.push_back(min);
    line(indent, "{");
    line(indent + 1, "struct " + fn_args + " " + fn_a + " = {" + join(args, ", ") + "};");
    line(indent + 1, "tt_parallel_for(" + count + ", " + fn_range + ", &" + fn_a + ");");
    line(indent, "}");
  }

  void emit_allocate(const lower::AllocateNode& n, int indent, bool tail) {
    const Buffer buffer(n.buffer);
    DataType t = buffer->dtype;
    int64_t bytes = buffer.storage_elements() * t.bytes();
    std::string name = fresh_name(buffer->name);
    std::string type = c_storage_type(t);
    bool on_stack = bytes <= kMaxStackBufferBytes && stack_bytes_ + bytes <= kMaxStackBytes;
    // A block of its own ends the array's lifetime with the allocation's, so
    // the compiler can reuse the stack slot.
    int inner = tail ? indent : indent + 1;
    if (!tail) line(indent, "{");
    if (on_stack) {
      line(inner, type + " " + name + "[" +
                      std::to_string(std::max<int64_t>(buffer.storage_elements(), 1)) +
                      "] __attribute__((aligned(" + std::to_string(align_) + ")));");
    } else {
      prelude_.heap_alloc(align_);
      line(inner, type + "* restrict " + name + " = (" + type + "*)tt_alloc(" +
                      std::to_string(std::max<int64_t>(bytes, 1)) + ");");
    }
    int64_t saved_stack = stack_bytes_;
    if (on_stack) stack_bytes_ += bytes;
    buffers_.emplace_back(buffer, name);
    emit_stmt(n.body, inner, true);
    buffers_.pop_back();
    stack_bytes_ = saved_stack;
    if (!on_stack) line(inner, "free(" + name + ");");
    if (!tail) line(indent, "}");
  }

  void emit_store(const lower::BufferStoreNode& n, int indent) {
    DataType t = n.buffer->dtype;
    std::string buf = buffer_name(n.buffer);
    int lanes = n.value.dtype().lanes();
    // Storing in float16 rounds as a cast to it does: the cast's round trip
    // through half (one conversion each way) is not emitted as well. Not
    // from float64, which would round twice through float.
    const auto rounding = n.value.as<ir::CastNode>();
    const bool from_float = rounding && rounding->value.dtype().is_float() &&
                            compute_tag(rounding->value.dtype()) == "f32";
    std::string value = is_float16(t) && from_float ? expr(rounding->value) : expr(n.value);
    if (lanes == 1) {
      std::string index = strip_parens(expr(n.index));
      line(indent, buf + "[" + index + "] = " + to_storage_scalar(t, strip_parens(value)) + ";");
      return;
    }
    check_lanes(lanes);
    if (auto base = unit_ramp_base(n.index)) {
      std::string vtype = prelude_.unaligned_vector_type(storage_tag(t), lanes);
      line(indent, "*(" + vtype + "*)(" + address(buf, *base) +
                       ") = " + strip_parens(to_storage_vector(t, lanes, value)) + ";");
      return;
    }
    // A scatter: one element per lane.
    std::string itype = vector_type(n.index.dtype());
    std::string vtype = prelude_.vector_type(storage_tag(t), lanes);
    line(indent, "{");
    line(indent + 1, itype + " tt_index = " + strip_parens(expr(n.index)) + ";");
    line(indent + 1,
         vtype + " tt_value = " + strip_parens(to_storage_vector(t, lanes, value)) + ";");
    line(indent + 1, "for (int tt_l = 0; tt_l < " + std::to_string(lanes) + "; ++tt_l) " + buf +
                         "[tt_index[tt_l]] = tt_value[tt_l];");
    line(indent, "}");
  }

  // ---- conversions between the computed and the stored form ----

  std::string to_storage_scalar(DataType t, const std::string& v) {
    if (is_float16(t)) {
      return prelude_.half_scalar_conversion(true) + "(" + strip_parens(v) + ")";
    }
    if (t.code() == DataType::Code::kBFloat) {
      prelude_.bfloat16();
      return "tt_f32_to_bf16(" + v + ")";
    }
    if (t.is_bool()) return "(uint8_t)(" + v + ")";
    return v;
  }

  std::string from_storage_scalar(DataType t, const std::string& v) {
    if (is_float16(t)) {
      return prelude_.half_scalar_conversion(false) + "(" + strip_parens(v) + ")";
    }
    if (t.code() == DataType::Code::kBFloat) {
      prelude_.bfloat16();
      return "tt_bf16_to_f32(" + v + ")";
    }
    return v;
  }

  std::string to_storage_vector(DataType t, int lanes, const std::string& v) {
    if (is_float16(t)) {
      return prelude_.half_conversion(lanes, true) + "(" + strip_parens(v) + ")";
    }
    if (t.code() == DataType::Code::kBFloat) {
      std::string u32 = prelude_.vector_type("u32", lanes),
                  u16 = prelude_.vector_type("u16", lanes);
      // Round to nearest-even on the bits; NaN lanes become a quiet NaN.
      return "({ " + prelude_.vector_type("f32", lanes) + " tt_f = " + strip_parens(v) + "; " +
             u32 + " tt_b = (" + u32 + ")tt_f; " + u32 + " tt_nan = (" + u32 +
             ")(tt_f != tt_f); tt_b += 0x7fffu + ((tt_b >> 16) & 1u); "
             "__builtin_convertvector(((tt_b >> 16) & ~tt_nan) | (tt_nan & 0x7fc0u), " +
             u16 + "); })";
    }
    if (t.is_bool()) {
      return "__builtin_convertvector(-(" + strip_parens(v) + "), " +
             prelude_.vector_type("u8", lanes) + ")";
    }
    return v;
  }

  std::string from_storage_vector(DataType t, int lanes, const std::string& v) {
    if (is_float16(t)) {
      return prelude_.half_conversion(lanes, false) + "(" + strip_parens(v) + ")";
    }
    if (t.code() == DataType::Code::kBFloat) {
      return "((" + prelude_.vector_type("f32", lanes) + ")(__builtin_convertvector(" + v + ", " +
             prelude_.vector_type("u32", lanes) + ") << 16))";
    }
    if (t.is_bool()) {
      return "(-__builtin_convertvector(" + v + ", " + prelude_.vector_type("i32", lanes) + "))";
    }
    return v;
  }

  // ---- expressions ----

  void check_lanes(int lanes) const {
    if (!is_power_of_two(lanes)) {
      unsupported("vectors of " + std::to_string(lanes) + " lanes (C vectors need a power of two)");
    }
  }

  std::string vector_type(DataType t) {
    check_lanes(t.lanes());
    return prelude_.vector_type(compute_tag(t), t.lanes());
  }

  /// The C type of a value of `t` (scalar or vector).
  std::string c_type(DataType t) { return t.is_scalar() ? c_scalar_type(t) : vector_type(t); }

  /// True if a vector of `t` (in its computed form) is wider than the
  /// target's vector registers.
  bool wider_than_registers(DataType t) const {
    return !t.is_scalar() && bytes_of_tag(compute_tag(t)) * t.lanes() > vector_bytes_;
  }

  /// The integer vector type of the same lane width as `t`'s computed form (for bit operations).
  std::string bits_vector_type(DataType t) {
    std::string tag = compute_tag(t);
    return prelude_.vector_type("i" + tag.substr(1), t.lanes());
  }

  /// A mask (int32 lanes, 0 / -1) from a comparison result of element type `operand`.
  std::string to_mask(DataType operand, const std::string& cmp) {
    if (bytes_of_tag(compute_tag(operand)) == 4) return cmp;
    return "__builtin_convertvector(" + strip_parens(cmp) + ", " +
           prelude_.vector_type("i32", operand.lanes()) + ")";
  }

  /// A mask resized to the lane width of `t`.
  std::string mask_for(DataType t, const std::string& mask) {
    if (bytes_of_tag(compute_tag(t)) == 4) return mask;
    return "__builtin_convertvector(" + strip_parens(mask) + ", " + bits_vector_type(t) + ")";
  }

  /// `x` broadcast to `lanes` lanes if it is a scalar of `t`.
  std::string widen(DataType t, int lanes, const std::string& x) {
    if (!t.is_scalar()) return x;
    if (t.is_bool()) return prelude_.broadcast("i32", lanes) + "(-(" + strip_parens(x) + "))";
    return prelude_.broadcast(compute_tag(t), lanes) + "(" + strip_parens(x) + ")";
  }

  /// A lane-by-lane loop computing `f(a[l])` (or `f(a[l], b[l])`) as a vector of type `type`.
  std::string per_lane(const std::string& type, int lanes, const std::string& a,
                       const std::string& f, const std::string* b = nullptr) {
    std::string out = "({ " + type + " tt_a = " + strip_parens(a) + "; ";
    if (b) out += type + " tt_b = " + strip_parens(*b) + "; ";
    out += "for (int tt_l = 0; tt_l < " + std::to_string(lanes) + "; ++tt_l) tt_a[tt_l] = " + f +
           "(tt_a[tt_l]" + (b ? ", tt_b[tt_l]" : "") + "); tt_a; })";
    return out;
  }

  std::string expr(const Expr& e) {
    return ir::dispatch(e, [&](const auto& n) -> std::string {
      using N = std::decay_t<decltype(n)>;
      DataType t = n.dtype;
      if constexpr (std::is_same_v<N, ir::IntImmNode>) {
        std::string v = format_int(n.value, t.element_of());
        if (t.is_scalar()) return v;
        return t.is_bool() ? widen(t.element_of(), t.lanes(), v)
                           : prelude_.broadcast(compute_tag(t), t.lanes()) + "(" + v + ")";
      } else if constexpr (std::is_same_v<N, ir::FloatImmNode>) {
        std::string v = format_float(n.value, t);
        return t.is_scalar() ? v : prelude_.broadcast(compute_tag(t), t.lanes()) + "(" + v + ")";
      } else if constexpr (std::is_same_v<N, ir::VarNode>) {
        return var_name(n);
      } else if constexpr (std::is_same_v<N, ir::BinaryNode>) {
        return binary(n);
      } else if constexpr (std::is_same_v<N, ir::CompareNode>) {
        DataType ot = n.a.dtype();
        if (ot.is_bool() && !ot.is_scalar()) ot = DataType::int32(ot.lanes());
        if (!t.is_scalar() && wider_than_registers(ot)) {
          std::string f = prelude_.wide_compare(compute_tag(ot), ot.lanes(), n.op);
          return to_mask(ot,
                         f + "(" + strip_parens(expr(n.a)) + ", " + strip_parens(expr(n.b)) + ")");
        }
        int level = n.op == ir::CompareOp::kEQ || n.op == ir::CompareOp::kNE ? 7 : 6;
        std::string a = operand(n.a, level, false), b = operand(n.b, level, true);
        std::string cmp = "(" + a + " " + std::string(ir::op_name(n.op)) + " " + b + ")";
        return t.is_scalar() ? cmp : to_mask(ot, cmp);
      } else if constexpr (std::is_same_v<N, ir::LogicalNode>) {
        bool is_and = n.op == ir::LogicalOp::kAnd;
        // A padding test is a chain of four bounds; as && it is four
        // branches per element, and GCC's jump threading over a few
        // hundred unrolled copies took a minute to compile one kernel.
        // Operands that cannot fault are combined without branches.
        const bool eager =
            t.is_scalar() && safe_to_evaluate_eagerly(n.a) && safe_to_evaluate_eagerly(n.b);
        int level = !t.is_scalar() ? 0 : eager ? (is_and ? 8 : 10) : (is_and ? 11 : 12);
        std::string a = level ? operand(n.a, level, false) : expr(n.a);
        std::string b = level ? operand(n.b, level, true) : expr(n.b);
        if (t.is_scalar()) {
          const char* op = eager ? (is_and ? " & " : " | ") : (is_and ? " && " : " || ");
          return "(" + a + op + b + ")";
        }
        return "(" + a + (is_and ? " & " : " | ") + b + ")";
      } else if constexpr (std::is_same_v<N, ir::NotNode>) {
        return (t.is_scalar() ? "(!" : "(~") + expr(n.a) + ")";
      } else if constexpr (std::is_same_v<N, ir::SelectNode>) {
        return select(n);
      } else if constexpr (std::is_same_v<N, ir::CastNode>) {
        return cast(n);
      } else if constexpr (std::is_same_v<N, ir::CallNode>) {
        return call(n);
      } else if constexpr (std::is_same_v<N, ir::BufferLoadNode>) {
        return load(n);
      } else if constexpr (std::is_same_v<N, ir::RampNode>) {
        check_lanes(n.lanes);
        std::string type = vector_type(t);
        std::string iota = "(" + type + "){";
        for (int l = 0; l < n.lanes; ++l) iota += (l ? ", " : "") + std::to_string(l);
        iota += "}";
        // Base and stride in the lanes' own type: GCC refuses to widen an
        // int64_t scalar (a loop variable is one, emit_for says why) into
        // a vector of int32 lanes.
        const std::string lane = c_scalar_of_tag(compute_tag(t.element_of()));
        auto as_lane = [&](const Expr& e) { return "(" + lane + ")(" + expr(e) + ")"; };
        auto stride = ir::as_const_int(n.stride);
        std::string scaled = stride && *stride == 1 ? iota : iota + " * " + as_lane(n.stride);
        auto base = ir::as_const_int(n.base);
        return base && *base == 0 ? scaled : "(" + scaled + " + " + as_lane(n.base) + ")";
      } else if constexpr (std::is_same_v<N, ir::BroadcastNode>) {
        check_lanes(n.lanes);
        return widen(n.value.dtype(), n.lanes, expr(n.value));
      } else {
        static_assert(std::is_same_v<N, ir::ReduceNode> || std::is_same_v<N, ir::ProducerLoadNode>);
        unsupported(std::string(n.type_key()) + " must be lowered before code generation");
      }
    });
  }

  /// The code of operand `e` of an operator of precedence `level`, without
  /// the parentheses C's precedence and left-to-right grouping make redundant.
  std::string operand(const Expr& e, int level, bool right) {
    std::string text = expr(e);
    int inner = infix_precedence(e);
    bool redundant = inner != 0 && (inner < level || (inner == level && !right));
    return redundant ? strip_parens(text) : text;
  }

  std::string binary(const ir::BinaryNode& n) {
    DataType t = n.dtype;
    if (n.op == BinaryOp::kAdd) {
      if (const ir::CallNode* d = as_dot4(n.b)) return dot4(*d, n.a);
      if (const ir::CallNode* d = as_dot4(n.a)) return dot4(*d, n.b);
    }
    int level = binary_precedence(n);
    std::string a = level ? operand(n.a, level, false) : expr(n.a);
    std::string b = level ? operand(n.b, level, true) : expr(n.b);
    bool vector = !t.is_scalar();
    bool narrow_int = t.is_integer() && t.bits() < 32;
    // Narrow integers compute in int after C's promotions; the cast wraps them back.
    auto wrap = [&](const std::string& x) {
      return narrow_int && !vector ? "((" + c_scalar_type(t) + ")" + x + ")" : x;
    };
    auto infix = [&](const char* op) { return wrap("(" + a + " " + op + " " + b + ")"); };
    std::string type = vector ? vector_type(t) : c_scalar_type(t);
    switch (n.op) {
      case BinaryOp::kAdd: return infix("+");
      case BinaryOp::kSub: return infix("-");
      case BinaryOp::kMul: return infix("*");
      case BinaryOp::kDiv: return infix("/");
      case BinaryOp::kMod:
      case BinaryOp::kFloorDiv:
      case BinaryOp::kFloorMod: {
        // ir::binary admits only integer operands here.
        if (!t.is_integer()) unsupported("'" + std::string(ir::op_name(n.op)) + "' on " + t.str());
        if (n.op == BinaryOp::kMod || t.is_uint()) {
          return infix(n.op == BinaryOp::kFloorDiv ? "/" : "%");
        }
        bool mod = n.op == BinaryOp::kFloorMod;
        if (!vector) return prelude_.floor_div_mod(compute_tag(t), mod) + "(" + a + ", " + b + ")";
        // Truncating division, then one step toward -inf where the remainder
        // and the divisor differ in sign (masks are -1 where true).
        std::string adjust = "((tt_r != 0) & ((tt_r ^ tt_b) < 0))";
        return "({ " + type + " tt_a = " + strip_parens(a) + ", tt_b = " + strip_parens(b) + "; " +
               type + " tt_r = tt_a % tt_b; " +
               (mod ? "tt_r + (" + adjust + " & tt_b)" : "tt_a / tt_b + " + adjust) + "; })";
      }
      case BinaryOp::kMin:
      case BinaryOp::kMax: {
        bool max = n.op == BinaryOp::kMax;
        if (!vector) {
          std::string picked = prelude_.scalar_min_max(compute_tag(t), max) + "(" +
                               strip_parens(a) + ", " + strip_parens(b) + ")";
          return t.is_float() ? picked : wrap(picked);
        }
        if (wider_than_registers(t)) {
          return prelude_.wide_min_max(compute_tag(t), t.lanes(), max) + "(" + strip_parens(a) +
                 ", " + strip_parens(b) + ")";
        }
        std::string bits = bits_vector_type(t);
        // fmin/fmax semantics: where b is NaN, a is taken (NaN only if both are).
        std::string pick_a = std::string("(tt_a ") + (max ? ">" : "<") + " tt_b)";
        if (t.is_float()) pick_a = "(" + pick_a + " | (tt_b != tt_b))";
        return "({ " + type + " tt_a = " + strip_parens(a) + ", tt_b = " + strip_parens(b) + "; " +
               bits + " tt_m = (" + bits + ")" + pick_a + "; (" + type + ")(((" + bits +
               ")tt_a & tt_m) | ((" + bits + ")tt_b & ~tt_m)); })";
      }
    }
    return "?";
  }

  std::string select(const ir::SelectNode& n) {
    DataType t = n.dtype;
    // A condition the same in every lane picks one side for the whole
    // vector: where the sides read memory more than once between them (a
    // row of a Winograd transform per select), evaluate only the side it
    // picks. A padding select's one load stays a blend, with no branch.
    // GCC wants both sides of a vector ?: of one type, and a side that is
    // only loads has the unaligned load type: cast both to the vector type.
    auto branch = [&](const std::string& c, const Expr& a, const Expr& b) {
      if (t.is_scalar()) return "(" + c + " ? " + expr(a) + " : " + expr(b) + ")";
      std::string type = vector_type(t);
      auto as_type = [&](const Expr& e) { return "(" + type + ")(" + strip_parens(expr(e)) + ")"; };
      return "(" + c + " ? " + as_type(a) + " : " + as_type(b) + ")";
    };
    auto lanes_alike = n.condition.as<ir::BroadcastNode>();
    if (lanes_alike && reads(n.true_value) + reads(n.false_value) >= 2) {
      return branch(expr(lanes_alike->value), n.true_value, n.false_value);
    }
    if (n.condition.dtype().is_scalar()) {
      return branch(expr(n.condition), n.true_value, n.false_value);
    }
    std::string c = expr(n.condition), a = expr(n.true_value), b = expr(n.false_value);
    std::string type = vector_type(t);
    std::string bits = bits_vector_type(t);
    return "({ " + bits + " tt_m = " + strip_parens(mask_for(t, c)) + "; (" + type + ")(((" + bits +
           ")" + a + " & tt_m) | ((" + bits + ")" + b + " & ~tt_m)); })";
  }

  /// Whether a value of `from` goes to bfloat16 through double, not float:
  /// float64, and integers wider than float's 24 bits (int32 33685505
  /// through float is a bfloat16 tie and rounds down; the evaluator rounds
  /// it once, up). Double holds every 32-bit integer, and rounds a 64-bit
  /// one as the evaluator does before its one rounding to bfloat16.
  static bool rounds_to_bf16_through_double(DataType from) {
    return is_float64(from) || (from.is_integer() && from.bits() > 24);
  }

  std::string cast(const ir::CastNode& n) {
    DataType to = n.dtype, from = n.value.dtype();
    std::string v = expr(n.value);
    bool to_half = is_float16(to);
    bool to_bf16 = to.code() == DataType::Code::kBFloat;
    if (to.is_scalar()) {
      if (to.is_bool()) return "(" + v + " != 0)";
      if (to_half) {
        // From double straight to half: through float would round twice.
        const std::string half =
            is_float64(from) ? "(_Float16)(" + strip_parens(v) + ")"
                             : prelude_.half_scalar_conversion(true) + "(" + strip_parens(v) + ")";
        return prelude_.half_scalar_conversion(false) + "(" + half + ")";
      }
      if (to_bf16 && rounds_to_bf16_through_double(from)) {
        prelude_.bfloat16_from_double();
        return "tt_f64_bf16_round((double)" + v + ")";
      }
      if (to_bf16) {
        prelude_.bfloat16();
        return "tt_bf16_round((float)" + v + ")";
      }
      return "((" + c_scalar_type(to) + ")" + v + ")";
    }
    int lanes = to.lanes();
    if (to.is_bool()) {
      if (from.is_bool()) return v;
      DataType elem = from.element_of();
      std::string zero = elem.is_float() ? format_float(0.0, elem) : format_int(0, elem);
      return to_mask(from, "(" + v + " != " + widen(elem, lanes, zero) + ")");
    }
    std::string type = vector_type(to);
    // A mask's true lanes are -1: negate to 1 before converting.
    std::string source = from.is_bool() ? "-(" + strip_parens(v) + ")" : strip_parens(v);
    // GCC converts a vector lane by lane in scalar code when the element
    // width changes more than twofold (bytes to int32 or float, float to
    // bytes); one doubling or halving at a time it is one instruction each.
    // Widening keeps every value, and narrowing wraps at every step, so the
    // chain gives the direct conversion's value wherever that is defined.
    if (!from.is_bool() && compute_tag(from) != compute_tag(to)) {
      auto narrow = [](DataType t) { return t.is_integer() && t.bits() < 32; };
      auto step = [&](const std::string& tag) {
        source =
            "__builtin_convertvector(" + source + ", " + prelude_.vector_type(tag, lanes) + ")";
      };
      const std::string sign = [&](DataType t) {
        return t.is_uint() ? "u" : "i";
      }(narrow(from) ? from : to);
      if (narrow(from) && (!narrow(to) || to.bits() > 16)) {
        if (from.bits() == 8) step(sign + "16");
        if (to.bits() != 32 || to.is_float()) step("i32");
      } else if (narrow(to) && !narrow(from)) {
        if (from.is_float() || from.bits() != 32) step("i32");
        if (to.bits() == 8) step(sign + "16");
      }
    }
    std::string converted = compute_tag(from) == compute_tag(to) && !from.is_bool()
                                ? v
                                : "__builtin_convertvector(" + source + ", " + type + ")";
    if (to_half) {
      // From double straight to half (lane by lane, and rare): through
      // float would round twice.
      const std::string half =
          is_float64(from)
              ? "__builtin_convertvector(" + strip_parens(v) + ", " +
                    prelude_.vector_type("f16", lanes) + ")"
              : prelude_.half_conversion(lanes, true) + "(" + strip_parens(converted) + ")";
      return prelude_.half_conversion(lanes, false) + "(" + half + ")";
    }
    if (to_bf16 && rounds_to_bf16_through_double(from)) {
      // Lane by lane (rare): through float would round twice.
      prelude_.bfloat16_from_double();
      return "({ " + vector_type(from) + " tt_a = " + strip_parens(v) + "; " + type +
             " tt_r; for (int tt_l = 0; tt_l < " + std::to_string(lanes) +
             "; ++tt_l) tt_r[tt_l] = tt_f64_bf16_round((double)tt_a[tt_l]); tt_r; })";
    }
    if (to_bf16) {
      prelude_.bfloat16();
      return per_lane(type, lanes, converted, "tt_bf16_round");
    }
    return converted;
  }

  /// acc + dot4_u8s8(a, b) in one helper call (acc null: 0).
  std::string dot4(const ir::CallNode& n, const Expr& acc) {
    int lanes = n.dtype.lanes();
    std::string zero = lanes == 1 ? "0" : prelude_.broadcast("i32", lanes) + "(0)";
    std::string f = prelude_.dot4_u8s8(lanes);
    return f + "(" + (acc ? strip_parens(expr(acc)) : zero) + ", " + strip_parens(expr(n.args[0])) +
           ", " + strip_parens(expr(n.args[1])) + ")";
  }

  static const ir::CallNode* as_dot4(const Expr& e) {
    if (e->kind() != ir::ExprKind::kCall) return nullptr;
    const auto& c = static_cast<const ir::CallNode&>(*e);
    return c.op == Intrinsic::kDot4U8S8 ? &c : nullptr;
  }

  std::string call(const ir::CallNode& n) {
    if (n.op == Intrinsic::kDot4U8S8) return dot4(n, Expr());
    DataType t = n.dtype;
    std::string f = std::string(intrinsic_name(n.op)) + (compute_tag(t) == "f32" ? "f" : "");
    std::string one = compute_tag(t) == "f32" ? "1.0f" : "1.0";
    std::string a = expr(n.args[0]);
    bool f32 = compute_tag(t) == "f32";
    // In float, exp, erf and tanh are plain arithmetic, so that the C
    // compiler vectorizes the loops around them (math.h's are opaque calls).
    if (f32 && (n.op == Intrinsic::kExp || n.op == Intrinsic::kErf || n.op == Intrinsic::kTanh ||
                n.op == Intrinsic::kSigmoid)) {
      f = prelude_.vectorizable_f32(n.op == Intrinsic::kSigmoid ? Intrinsic::kExp : n.op);
    }
    if (t.is_scalar()) {
      switch (n.op) {
        case Intrinsic::kRsqrt: return "(" + one + " / " + f + "(" + strip_parens(a) + "))";
        case Intrinsic::kSigmoid: return "(" + one + " / (" + one + " + " + f + "(-" + a + ")))";
        case Intrinsic::kPow:
          return f + "(" + strip_parens(a) + ", " + strip_parens(expr(n.args[1])) + ")";
        default: return f + "(" + strip_parens(a) + ")";
      }
    }
    std::string type = vector_type(t);
    int lanes = t.lanes();
    switch (n.op) {
      case Intrinsic::kRsqrt:
        return "(" + prelude_.broadcast(compute_tag(t), lanes) + "(" + one + ") / " +
               per_lane(type, lanes, a, f) + ")";
      case Intrinsic::kSigmoid:
        return "(" + prelude_.broadcast(compute_tag(t), lanes) + "(" + one + ") / (" +
               prelude_.broadcast(compute_tag(t), lanes) + "(" + one + ") + " +
               (f32 ? prelude_.vector_exp_f32(lanes) + "(-" + a + ")"
                    : per_lane(type, lanes, "-" + a, f)) +
               "))";
      case Intrinsic::kExp:
        if (f32) return prelude_.vector_exp_f32(lanes) + "(" + strip_parens(a) + ")";
        return per_lane(type, lanes, a, f);
      case Intrinsic::kPow: {
        std::string b = expr(n.args[1]);
        return per_lane(type, lanes, a, f, &b);
      }
      default: return per_lane(type, lanes, a, f);
    }
  }

  std::string load(const ir::BufferLoadNode& n) {
    DataType t = n.buffer->dtype;
    std::string buf = buffer_name(n.buffer);
    int lanes = n.dtype.lanes();
    if (lanes == 1) {
      return from_storage_scalar(t, buf + "[" + strip_parens(expr(n.index)) + "]");
    }
    check_lanes(lanes);
    if (auto base = unit_ramp_base(n.index)) {
      std::string vtype = prelude_.unaligned_vector_type(storage_tag(t), lanes);
      return from_storage_vector(t, lanes,
                                 "(*(const " + vtype + "*)(" + address(buf, *base) + "))");
    }
    // A gather: one element per lane.
    std::string type = prelude_.vector_type(storage_tag(t), lanes);
    std::string gathered = "({ " + vector_type(n.index.dtype()) +
                           " tt_i = " + strip_parens(expr(n.index)) + "; " + type +
                           " tt_g; for (int tt_l = 0; tt_l < " + std::to_string(lanes) +
                           "; ++tt_l) tt_g[tt_l] = " + buf + "[tt_i[tt_l]]; tt_g; })";
    return from_storage_vector(t, lanes, gathered);
  }

  /// `buf + base`, or `buf` when the base is 0.
  std::string address(const std::string& buf, const Expr& base) {
    auto c = ir::as_const_int(base);
    return c && *c == 0 ? buf : buf + " + " + strip_parens(expr(base));
  }

  static std::optional<Expr> unit_ramp_base(const Expr& index) {
    if (index->kind() != ir::ExprKind::kRamp) return std::nullopt;
    const auto& r = static_cast<const ir::RampNode&>(*index);
    auto stride = ir::as_const_int(r.stride);
    if (!stride || *stride != 1) return std::nullopt;
    return r.base;
  }

  /// `x` without one pair of enclosing parentheses, when they enclose all of it.
  static std::string strip_parens(const std::string& x) {
    if (x.size() < 2 || x.front() != '(' || x.back() != ')') return x;
    int depth = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i] == '(') ++depth;
      if (x[i] == ')') --depth;
      if (depth == 0 && i + 1 < x.size()) return x;
    }
    // "({ ... })" is a statement expression: its parentheses are part of it.
    if (x.size() > 2 && x[1] == '{') return x;
    return x.substr(1, x.size() - 2);
  }

  Prelude& prelude_;
  PrimFunc func_;
  int64_t num_cores_;
  int64_t align_;
  int64_t vector_bytes_;  ///< the target's vector register width
  std::ostringstream body_;
  std::ostringstream outlined_;                ///< functions holding the bodies of parallel loops
  std::string symbol_;                         ///< the kernel's C name
  std::set<const ir::BufferNode*> read_only_;  ///< parameters the kernel never writes
  std::set<std::string> used_names_;
  std::vector<std::pair<Buffer, std::string>> buffers_;  ///< in scope, innermost last
  std::map<const ir::VarNode*, std::string> vars_;
  std::set<const ir::VarNode*> wide_loop_vars_;  ///< int32 loop variables declared int64_t
  bool in_parallel_ = false;                     ///< inside the body of a parallel loop
  bool in_simd_ = false;                         ///< inside the loop of an omp simd
  int64_t stack_bytes_ = 0;
};

const ir::TargetNode& check_c_target(const ir::Target& target) {
  TT_CHECK(target, kInvalidArgument, "C code generation needs a target");
  TT_CHECK(target->kind == "c", kInvalidArgument,
           "C code generation needs a target of kind 'c', got '", target->kind, "'");
  return *target;
}

// -mattr features (GCC spelling) that GCC enables with -m<feature> on x86.
bool is_x86_feature(const std::string& feature) {
  static const std::set<std::string> features = {
      "sse",        "sse2",       "sse3",     "ssse3",    "sse4.1",     "sse4.2",     "popcnt",
      "avx",        "avx2",       "fma",      "f16c",     "bmi",        "bmi2",       "avx512f",
      "avx512cd",   "avx512bw",   "avx512dq", "avx512vl", "avx512ifma", "avx512vbmi", "avx512vnni",
      "avx512bf16", "avx512fp16", "avxvnni",  "amx-tile", "amx-int8",   "amx-bf16"};
  return features.count(feature) > 0;
}

}  // namespace

std::string c_function_name(const std::string& name) { return sanitize(name, "_kernel"); }

std::vector<std::string> compile_flags(const ir::Target& target) {
  const ir::TargetNode& t = check_c_target(target);
  // -Wno-psabi: GCC notes that wide vector types change the calling
  // convention when the target lacks the registers; the helpers are static.
  // -fno-trapping-math: kernels never read the floating-point exception
  // flags, and without it GCC will not turn the selects of the lane loops
  // (exp's and erf's range checks) into vector blends. Results are the same.
  std::vector<std::string> flags = {
      "-std=gnu11", "-O3",     "-fPIC",           "-shared",
      "-fopenmp",   "-fwrapv", "-fno-math-errno", "-fno-trapping-math",
      "-Wno-psabi", "-lm"};
  auto mattr = t.attr<std::vector<std::string>>("mattr");
  // The local CPU as a target (resolved once: it does not change while we run).
  static const ir::Target local = ir::Target::parse("native");
  bool is_local = t.attr<std::string>("mcpu") == local->attr<std::string>("mcpu") &&
                  mattr == local->attr<std::vector<std::string>>("mattr");
#if defined(__x86_64__) || defined(__i386__)
  // -march=native only for exactly this CPU: with fewer -mattr features the
  // code must not use the others, since it may be meant for another machine.
  if (is_local) {
    flags.push_back("-march=native");
  } else {
    flags.push_back("-march=x86-64");
    for (const auto& feature : mattr) {
      if (is_x86_feature(feature)) flags.push_back("-m" + feature);
    }
  }
  // The loops GCC vectorizes itself (epilogues, exp and erf lane loops) get
  // the target's vector width, not the one GCC's tuning prefers for the CPU
  // it takes this one for: 256 bits on AVX-512 machines even where 512-bit
  // vectors are faster, and 128 on virtual machines whose CPU -march=native
  // takes for an older one.
  int64_t bits = std::clamp<int64_t>(ir::hardware_params(target)->vector_bytes * 8, 128, 512);
  flags.push_back("-mprefer-vector-width=" + std::to_string(bits));
#else
  if (is_local) flags.push_back("-mcpu=native");
#endif
  // The target's own flags come last, so they can override ours (-O2 after -O3).
  const size_t ours = flags.size();
  for (auto& word : detail::split_words(t.attr<std::string>("cflags"))) {
    // Skip exact repeats of our flags (the default -cflags is -O3).
    if (std::find(flags.begin(), flags.begin() + ours, word) == flags.begin() + ours) {
      flags.push_back(std::move(word));
    }
  }
  return flags;
}

namespace {

/// The C back end: each kernel emitted once, beside the prelude (vector
/// types and helpers) that every kernel added so far needs. A module of any
/// subset of the kernels takes the whole prelude: its declarations are
/// static inline or typedefs, which cost nothing where unused.
class CKernelSources final : public KernelSources {
 public:
  explicit CKernelSources(const ir::Target& target)
      : target_(target), num_cores_(check_c_target(target).attr<int64_t>("num-cores")) {
    ir::HardwareParams hw = ir::hardware_params(target);
    vector_bytes_ = std::max<int64_t>(hw->vector_bytes, 16);
    align_ = vector_bytes_;
  }

  size_t add(const PrimFunc& f) override {
    TT_CHECK(f, kInvalidArgument, "C code generation: null function");
    std::string symbol = c_function_name(f->name);
    auto it = symbols_.find(symbol);
    TT_CHECK(it == symbols_.end(), kInvalidArgument, "functions '", it->second, "' and '", f->name,
             "' both become the C function '", symbol, "'; kernel names must differ");
    // Emitted into a copy of the prelude, kept only when the kernel succeeds,
    // so a kernel that cannot be expressed leaves no trace.
    Prelude prelude = prelude_;
    // The emitter's lane loops remain for when those passes are disabled.
    PrimFunc legal = lower::run_target_pipeline(f, vector_bytes_);
    FunctionEmitter emitter(prelude, legal, num_cores_, align_, vector_bytes_);
    std::string text = emitter.emit();
    // What the kernel takes, in the library itself: a plan read back from
    // disk is checked against it before any call (runtime/plan.h).
    std::vector<int64_t> bytes = lower::argument_bytes(f);
    text += "const int64_t " + std::string(kArgumentBytesPrefix) + symbol + "[] = {" +
            std::to_string(bytes.size());
    for (int64_t b : bytes) text += ", " + std::to_string(b);
    text += "};\n";
    prelude_ = std::move(prelude);
    symbols_.emplace(symbol, f->name);
    kernels_.push_back(std::move(text));
    return kernels_.size() - 1;
  }

  std::string source(const std::vector<size_t>& which) const override {
    std::string out = header() + "\nstatic int32_t tt_num_threads = " + default_threads() + ";\n" +
                      shared_definitions();
    for (size_t i : which) out += "\n" + kernel(i);
    return out;
  }

  std::vector<SourceUnit> units(const std::vector<size_t>& which, size_t count) const override {
    size_t total = 0;
    for (size_t i : which) total += kernel(i).size();
    // Below this much source a unit's fixed cost (a compiler start, the
    // prelude parsed again) is more than splitting saves.
    constexpr size_t kLeastUnitBytes = 32 * 1024;
    count = std::min({count, total / kLeastUnitBytes, which.size()});
    std::vector<SourceUnit> out;
    if (count <= 1) {
      out.push_back({source(which), which});
      return out;
    }
    // Consecutive kernels, each unit closing once it reaches its share.
    std::vector<std::vector<size_t>> held(1);
    size_t done = 0;
    for (size_t i : which) {
      if (held.size() < count && !held.back().empty() && done >= total * held.size() / count) {
        held.emplace_back();
      }
      held.back().push_back(i);
      done += kernel(i).size();
    }
    // The thread count is one variable of the library, defined in the first unit.
    const std::string shared = "int32_t tt_num_threads __attribute__((visibility(\"hidden\")))";
    for (size_t u = 0; u < held.size(); ++u) {
      std::string text = header();
      text += u == 0 ? "\n" + shared + " = " + default_threads() + ";\n" + shared_definitions()
                     : "\nextern " + shared + ";\n";
      for (size_t i : held[u]) text += "\n" + kernel(i);
      out.push_back({std::move(text), std::move(held[u])});
    }
    return out;
  }

  /// The includes and the helpers and types every kernel added so far uses.
  std::string header() const {
    return "// Generated by tensortune for target: " + target_.str() +
           "\n#include <math.h>\n#include <stdint.h>\n#include <stdio.h>\n"
           "#include <stdlib.h>\n#include <string.h>\n\n" +
           (num_cores_ > 1 ? "void tt_parallel_for(int64_t n, void (*body)(void*, int64_t, "
                             "int64_t), void* ctx) __attribute__((visibility(\"hidden\")));\n\n"
                           : "") +
           prelude_.text();
  }

  /// Parallel loops use the target's cores unless the caller says otherwise
  /// (a compiled model run with --threads).
  std::string default_threads() const { return std::to_string(std::max<int64_t>(num_cores_, 1)); }

  /// What a library defines once, after tt_num_threads: its setter and tt_write_shares.
  std::string shared_definitions() const {
    return "int32_t tt_set_num_threads(int32_t n) {\n  tt_num_threads = n > 0 ? n : " +
           default_threads() + ";\n  return 0;\n}\n" +
           (num_cores_ > 1 ? std::string(c_helper_thread_pool) + "\n" : std::string()) +
           write_shares_source();
  }

  const std::string& kernel(size_t i) const {
    TT_ICHECK(i < kernels_.size(), "kernel ", i, " of ", kernels_.size());
    return kernels_[i];
  }

  /// `void tt_write_shares(char* dst, const char* src, int64_t bytes)`: copies
  /// on the kernels' own threads, each a contiguous share of whole cache
  /// lines, leaving `dst` as a parallel kernel leaves its output. The run
  /// worker calls it to write a kernel's activations before a timed call
  /// (RunnerOptions::fresh_activations); being in the module, it runs on the
  /// threads and thread count the kernels run on.
  std::string write_shares_source() const {
    if (num_cores_ <= 1) {
      return "void tt_write_shares(char* dst, const char* src, int64_t bytes) {\n"
             "  memcpy(dst, src, (size_t)bytes);\n}\n";
    }
    // Share t of n is iteration t: tt_parallel_for gives it to thread t.
    return "struct tt_write_shares_args {\n"
           "  char* dst;\n  const char* src;\n  int64_t bytes, shares;\n};\n\n"
           "static void tt_write_share(void* p, int64_t begin, int64_t end) {\n"
           "  const struct tt_write_shares_args* a = (const struct tt_write_shares_args*)p;\n"
           "  int64_t lines = (a->bytes + 63) / 64;\n"
           "  for (int64_t t = begin; t < end; ++t) {\n"
           "    int64_t first = lines * t / a->shares * 64, last = lines * (t + 1) / a->shares * "
           "64;\n"
           "    if (last > a->bytes) last = a->bytes;\n"
           "    if (first < last) memcpy(a->dst + first, a->src + first, (size_t)(last - first));\n"
           "  }\n}\n\n"
           "void tt_write_shares(char* dst, const char* src, int64_t bytes) {\n"
           "  struct tt_write_shares_args a = {dst, src, bytes, tt_num_threads};\n"
           "  tt_parallel_for(tt_num_threads, tt_write_share, &a);\n}\n";
  }

  Module compile(const std::string& source, const ModuleOptions& options) const override {
    std::vector<std::string> compiler = detail::split_words(target_->attr<std::string>("compiler"));
    return Module::compile(source, compiler, compile_flags(target_), options);
  }

  Module compile_units(const std::vector<SourceUnit>& units,
                       const ModuleOptions& options) const override {
    std::vector<std::string> compiler = detail::split_words(target_->attr<std::string>("compiler"));
    std::vector<std::string> texts;
    for (const SourceUnit& unit : units) texts.push_back(unit.text);
    return Module::compile_units(texts, compiler, compile_flags(target_), options);
  }

  size_t size() const override { return kernels_.size(); }

 private:
  ir::Target target_;
  int64_t num_cores_;
  int64_t align_ = 16;
  int64_t vector_bytes_ = 16;
  Prelude prelude_;
  std::vector<std::string> kernels_;
  std::map<std::string, std::string> symbols_;  // C name -> kernel name
};

TT_REGISTER_BACKEND((BackendInfo{
    "c", "C11 (GNU dialect) built by the target's -compiler into a shared library",
    [](const ir::Target& target) -> std::unique_ptr<KernelSources> {
      return std::make_unique<CKernelSources>(target);
    }}));

}  // namespace

std::string generate_c(const std::vector<PrimFunc>& funcs, const ir::Target& target) {
  check_c_target(target);
  std::unique_ptr<KernelSources> sources = kernel_sources(target);
  std::vector<size_t> all;
  for (const auto& f : funcs) all.push_back(sources->add(f));
  return sources->source(all);
}

}  // namespace tensortune::codegen
