#include "tokenizer/chat_template.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <functional>
#include <map>
#include <optional>

#include "core/error.h"
#include "model/json_util.h"
#include "tokenizer/utf8.h"

namespace fuselm {

using Json = nlohmann::ordered_json;

namespace {

// The template ships inside the model's files, so it is untrusted input. Parsing, evaluating and
// freeing recurse once per level of nesting, and a few operators can build huge values from a
// short template: these bounds turn "(((((..." or range(10**12) into an Error, not a crash. Real
// templates nest a few levels and build prompts of kilobytes.
constexpr int kMaxNesting = 64;                      // ( [ { not - in an expression; {% if/for %} blocks
constexpr size_t kMaxExpressionTokens = 1024;        // bounds the depth of a left-nested a + b + c ...
constexpr int kMaxValueDepth = 512;                  // lists/dicts a {% set %} stores
constexpr int64_t kMaxRangeItems = 100000;           // Jinja's sandbox, which HF renders in, has the same
constexpr size_t kMaxStringBytes = size_t{1} << 24;  // any string a template builds, and its output
constexpr size_t kMaxListItems = size_t{1} << 20;    // any list a template builds

// ---------------------------------------------------------------------------------------------
// Values: JSON plus Jinja's "undefined".

struct Value {
  Json j;
  bool undefined = false;
  static Value undef() { return {Json(), true}; }
};

[[noreturn]] void template_error(int line, const std::string& what) {
  fail("chat template line ", line, ": ", what);
}

bool truthy(const Value& v) {
  if (v.undefined) return false;
  const Json& j = v.j;
  switch (j.type()) {
    case Json::value_t::null: return false;
    case Json::value_t::boolean: return j.get<bool>();
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return j.get<int64_t>() != 0;
    case Json::value_t::number_float: return j.get<double>() != 0.0;
    case Json::value_t::string: return !j.get_ref<const std::string&>().empty();
    case Json::value_t::array:
    case Json::value_t::object: return !j.empty();
    default: return false;
  }
}

std::string python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d);
  std::string s(buf, end);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string python_quote(const std::string& s) {
  char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == q || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + q;
}

// Python's str() of a value, which is what {{ }} prints.
std::string to_str(const Json& j, bool nested = false) {
  switch (j.type()) {
    case Json::value_t::null: return "None";
    case Json::value_t::boolean: return j.get<bool>() ? "True" : "False";
    case Json::value_t::number_integer: return std::to_string(j.get<int64_t>());
    case Json::value_t::number_unsigned: return std::to_string(j.get<uint64_t>());
    case Json::value_t::number_float: return python_float(j.get<double>());
    case Json::value_t::string: return nested ? python_quote(j.get<std::string>()) : j.get<std::string>();
    case Json::value_t::array: {
      std::string s = "[";
      for (size_t i = 0; i < j.size(); ++i) s += (i ? ", " : "") + to_str(j[i], true);
      return s + "]";
    }
    case Json::value_t::object: {
      std::string s = "{";
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        s += (first ? "" : ", ") + python_quote(it.key()) + ": " + to_str(it.value(), true);
        first = false;
      }
      return s + "}";
    }
    default: return "";
  }
}

std::string to_str(const Value& v) { return v.undefined ? "" : to_str(v.j); }

// Python's json.dumps(x, ensure_ascii=False, indent=indent), as transformers' tojson filter.
void dump_python_json(const Json& j, int indent, int depth, std::string& out) {
  auto newline = [&](int d) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * d), ' ');
  };
  const char* item_sep = indent < 0 ? ", " : ",";
  switch (j.type()) {
    case Json::value_t::array:
      if (j.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < j.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        dump_python_json(j[i], indent, depth + 1, out);
      }
      newline(depth);
      out += ']';
      return;
    case Json::value_t::object: {
      if (j.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!first) out += item_sep;
        first = false;
        newline(depth + 1);
        out += Json(it.key()).dump(-1, ' ', false, Json::error_handler_t::replace);
        out += ": ";
        dump_python_json(it.value(), indent, depth + 1, out);
      }
      newline(depth);
      out += '}';
      return;
    }
    case Json::value_t::number_float: out += python_float(j.get<double>()); return;
    default: out += j.dump(-1, ' ', false, Json::error_handler_t::replace); return;
  }
}

bool is_number(const Json& j) { return j.is_number(); }

// Nesting depth of a value, counted no further than `limit` + 1 (so the recursion stays bounded).
int value_depth(const Json& j, int limit) {
  if (!j.is_structured()) return 0;
  int deepest = 0;
  if (limit > 0)
    for (const Json& child : j) deepest = std::max(deepest, value_depth(child, limit - 1));
  return 1 + deepest;
}

void check_string_size(size_t bytes, int line) {
  if (bytes > kMaxStringBytes)
    template_error(line, str_cat("the template builds a string of ", bytes, " bytes, more than the ", kMaxStringBytes,
                                 " supported"));
}

void check_list_size(size_t items, int line) {
  if (items > kMaxListItems)
    template_error(line, str_cat("the template builds a list of ", items, " items, more than the ", kMaxListItems,
                                 " supported"));
}

// An integer argument of a filter or function, in [lo, hi].
int64_t int_arg(const Json& j, int64_t lo, int64_t hi, const std::string& what, int line) {
  if (std::optional<int64_t> x = json_integer(j, lo, hi)) return *x;
  template_error(line, str_cat(what, " must be an integer in [", lo, ", ", hi, "], found ", to_str(j, true)));
}

bool values_equal(const Value& a, const Value& b) {
  if (a.undefined || b.undefined) return a.undefined == b.undefined;
  if (is_number(a.j) && is_number(b.j) && !a.j.is_boolean() && !b.j.is_boolean())
    return a.j.get<double>() == b.j.get<double>();
  return a.j == b.j;
}

// ---------------------------------------------------------------------------------------------
// Expressions.

struct Expr {
  enum class Kind {
    kLiteral, kName, kList, kDict, kAttr, kIndex, kSlice, kCall, kFilter, kTest, kUnary, kBinary, kTernary
  } kind;
  int line = 0;
  Json literal;
  std::string name;  // variable, attribute, filter, test, operator
  std::vector<std::unique_ptr<Expr>> args;  // operands / call arguments / list items / dict k,v pairs
  std::vector<std::string> kwarg_names;  // for calls: names of the trailing keyword arguments
  bool negated = false;  // `is not`
};
using ExprPtr = std::unique_ptr<Expr>;

struct Token {
  enum class Kind { kName, kString, kInt, kFloat, kOp, kEnd } kind;
  std::string text;
};

std::vector<Token> lex_expression(std::string_view s, int line) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t b = i;
      while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
      out.push_back({Token::Kind::kName, std::string(s.substr(b, i - b))});
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t b = i;
      bool is_float = false;
      while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.' || s[i] == '_')) {
        if (s[i] == '.') {
          if (i + 1 >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i + 1]))) break;
          is_float = true;
        }
        ++i;
      }
      out.push_back({is_float ? Token::Kind::kFloat : Token::Kind::kInt, std::string(s.substr(b, i - b))});
      continue;
    }
    if (c == '\'' || c == '"') {
      std::string value;
      ++i;
      while (i < s.size() && s[i] != c) {
        if (s[i] == '\\' && i + 1 < s.size()) {
          char e = s[++i];
          switch (e) {
            case 'n': value += '\n'; break;
            case 't': value += '\t'; break;
            case 'r': value += '\r'; break;
            case '\\': value += '\\'; break;
            case '\'': value += '\''; break;
            case '"': value += '"'; break;
            case 'u':
              if (uint32_t cp = 0; i + 4 < s.size() &&
                                   std::from_chars(s.data() + i + 1, s.data() + i + 5, cp, 16).ptr == s.data() + i + 5) {
                utf8::append(value, cp);
                i += 4;
                break;
              }
              [[fallthrough]];
            default:
              value += '\\';
              value += e;
          }
          ++i;
        } else {
          value += s[i++];
        }
      }
      if (i >= s.size()) template_error(line, "unterminated string literal");
      ++i;
      out.push_back({Token::Kind::kString, value});
      continue;
    }
    static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "(",
                                       ")",  "[",  "]",  "{",  "}",  ",",  ".", ":", "|", "="};
    bool matched = false;
    for (const char* op : kOps) {
      size_t n = std::strlen(op);
      if (s.substr(i, n) == op) {
        out.push_back({Token::Kind::kOp, op});
        i += n;
        matched = true;
        break;
      }
    }
    if (!matched) template_error(line, str_cat("unexpected character '", c, "' in expression"));
  }
  if (out.size() > kMaxExpressionTokens)
    template_error(line, str_cat("expression of ", out.size(), " tokens, more than the ", kMaxExpressionTokens,
                                 " supported"));
  out.push_back({Token::Kind::kEnd, ""});
  return out;
}

class ExprParser {
 public:
  ExprParser(std::vector<Token> tokens, int line) : t_(std::move(tokens)), line_(line) {}

  ExprPtr parse_expression() { return parse_ternary(); }
  ExprPtr parse_without_condition() { return parse_or(); }

  bool at_end() const { return t_[i_].kind == Token::Kind::kEnd; }
  bool peek_name(std::string_view n) const { return t_[i_].kind == Token::Kind::kName && t_[i_].text == n; }
  bool peek_op(std::string_view o) const { return t_[i_].kind == Token::Kind::kOp && t_[i_].text == o; }
  bool accept_name(std::string_view n) {
    if (!peek_name(n)) return false;
    ++i_;
    return true;
  }
  bool accept_op(std::string_view o) {
    if (!peek_op(o)) return false;
    ++i_;
    return true;
  }
  void expect_op(std::string_view o) {
    if (!accept_op(o)) template_error(line_, str_cat("expected '", o, "' but found '", t_[i_].text, "'"));
  }
  std::string expect_identifier() {
    if (t_[i_].kind != Token::Kind::kName) template_error(line_, str_cat("expected a name, found '", t_[i_].text, "'"));
    return t_[i_++].text;
  }
  void expect_end(std::string_view what) {
    if (!at_end()) template_error(line_, str_cat("unexpected '", t_[i_].text, "' in ", what));
  }

 private:
  // Counts the parser's recursion into nested sub-expressions for as long as it lives.
  struct Nested {
    explicit Nested(ExprParser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting)
        template_error(p_.line_, str_cat("expression nested more than ", kMaxNesting, " levels deep"));
    }
    ~Nested() { --p_.depth_; }
    ExprParser& p_;
  };

  ExprPtr make(Expr::Kind k) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line_;
    return e;
  }
  ExprPtr binary(std::string op, ExprPtr a, ExprPtr b) {
    auto e = make(Expr::Kind::kBinary);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  ExprPtr parse_ternary() {
    Nested nested(*this);
    ExprPtr value = parse_or();
    if (accept_name("if")) {
      auto e = make(Expr::Kind::kTernary);
      ExprPtr cond = parse_or();
      ExprPtr otherwise = accept_name("else") ? parse_ternary() : nullptr;
      e->args.push_back(std::move(cond));
      e->args.push_back(std::move(value));
      e->args.push_back(std::move(otherwise));
      return e;
    }
    return value;
  }
  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (accept_name("or")) e = binary("or", std::move(e), parse_and());
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (accept_name("and")) e = binary("and", std::move(e), parse_not());
    return e;
  }
  ExprPtr parse_not() {
    if (accept_name("not")) {
      Nested nested(*this);
      auto e = make(Expr::Kind::kUnary);
      e->name = "not";
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr e = parse_concat();
    for (;;) {
      std::string op;
      for (const char* o : {"==", "!=", "<=", ">=", "<", ">"})
        if (accept_op(o)) {
          op = o;
          break;
        }
      if (op.empty()) {
        if (accept_name("in")) {
          op = "in";
        } else if (peek_name("not") && t_[i_ + 1].kind == Token::Kind::kName && t_[i_ + 1].text == "in") {
          i_ += 2;
          op = "not in";
        } else {
          return e;
        }
      }
      e = binary(op, std::move(e), parse_concat());
    }
  }
  ExprPtr parse_concat() {
    ExprPtr e = parse_additive();
    while (accept_op("~")) e = binary("~", std::move(e), parse_additive());
    return e;
  }
  ExprPtr parse_additive() {
    ExprPtr e = parse_multiplicative();
    for (;;) {
      if (accept_op("+")) {
        e = binary("+", std::move(e), parse_multiplicative());
      } else if (accept_op("-")) {
        e = binary("-", std::move(e), parse_multiplicative());
      } else {
        return e;
      }
    }
  }
  ExprPtr parse_multiplicative() {
    ExprPtr e = parse_unary();
    for (;;) {
      std::string op;
      for (const char* o : {"//", "*", "/", "%"})
        if (accept_op(o)) {
          op = o;
          break;
        }
      if (op.empty()) return e;
      e = binary(op, std::move(e), parse_unary());
    }
  }
  ExprPtr parse_unary() {
    if (accept_op("-")) {
      Nested nested(*this);
      auto e = make(Expr::Kind::kUnary);
      e->name = "-";
      e->args.push_back(parse_unary());
      return e;
    }
    if (accept_op("+")) {
      Nested nested(*this);
      return parse_unary();
    }
    return parse_filters(parse_postfix(parse_primary()));
  }
  ExprPtr parse_primary() {
    const Token tok = t_[i_];
    switch (tok.kind) {
      case Token::Kind::kString: {
        ++i_;
        std::string s = tok.text;
        while (t_[i_].kind == Token::Kind::kString) s += t_[i_++].text;  // adjacent literals join
        auto e = make(Expr::Kind::kLiteral);
        e->literal = s;
        return e;
      }
      case Token::Kind::kInt: {
        ++i_;
        auto e = make(Expr::Kind::kLiteral);
        std::string digits = tok.text;
        std::erase(digits, '_');
        int64_t value = 0;
        auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
        if (ec != std::errc() || end != digits.data() + digits.size())
          template_error(line_, str_cat("integer literal ", tok.text, " does not fit in 64 bits"));
        e->literal = value;
        return e;
      }
      case Token::Kind::kFloat: {
        ++i_;
        auto e = make(Expr::Kind::kLiteral);
        double value = 0;
        auto [end, ec] = std::from_chars(tok.text.data(), tok.text.data() + tok.text.size(), value);
        if (ec != std::errc()) template_error(line_, str_cat("float literal ", tok.text, " is out of range"));
        e->literal = value;
        return e;
      }
      case Token::Kind::kName: {
        ++i_;
        auto e = make(Expr::Kind::kLiteral);
        if (tok.text == "true" || tok.text == "True") {
          e->literal = true;
        } else if (tok.text == "false" || tok.text == "False") {
          e->literal = false;
        } else if (tok.text == "none" || tok.text == "None") {
          e->literal = nullptr;
        } else {
          e->kind = Expr::Kind::kName;
          e->name = tok.text;
        }
        return e;
      }
      case Token::Kind::kOp:
        if (accept_op("(")) {
          ExprPtr inner = parse_expression();
          if (accept_op(",")) {  // a tuple: treated as a list
            auto list = make(Expr::Kind::kList);
            list->args.push_back(std::move(inner));
            while (!peek_op(")")) {
              list->args.push_back(parse_expression());
              if (!accept_op(",")) break;
            }
            expect_op(")");
            return list;
          }
          expect_op(")");
          return inner;
        }
        if (accept_op("[")) {
          auto list = make(Expr::Kind::kList);
          while (!peek_op("]")) {
            list->args.push_back(parse_expression());
            if (!accept_op(",")) break;
          }
          expect_op("]");
          return list;
        }
        if (accept_op("{")) {
          auto dict = make(Expr::Kind::kDict);
          while (!peek_op("}")) {
            dict->args.push_back(parse_expression());
            expect_op(":");
            dict->args.push_back(parse_expression());
            if (!accept_op(",")) break;
          }
          expect_op("}");
          return dict;
        }
        [[fallthrough]];
      default: template_error(line_, str_cat("unexpected '", tok.text, "' in expression"));
    }
  }
  void parse_call_args(Expr& call) {
    while (!peek_op(")")) {
      if (t_[i_].kind == Token::Kind::kName && t_[i_ + 1].kind == Token::Kind::kOp && t_[i_ + 1].text == "=") {
        call.kwarg_names.push_back(t_[i_].text);
        i_ += 2;
      } else if (!call.kwarg_names.empty()) {
        template_error(line_, "positional argument after keyword argument");
      }
      call.args.push_back(parse_expression());
      if (!accept_op(",")) break;
    }
    expect_op(")");
  }
  ExprPtr parse_postfix(ExprPtr e) {
    for (;;) {
      if (accept_op(".")) {
        auto a = make(Expr::Kind::kAttr);
        a->name = expect_identifier();
        a->args.push_back(std::move(e));
        e = std::move(a);
      } else if (accept_op("[")) {
        ExprPtr parts[3];
        bool slice = false;
        for (int k = 0; k < 3; ++k) {
          if (!peek_op(":") && !peek_op("]")) parts[k] = parse_expression();
          if (k < 2 && accept_op(":")) {
            slice = true;
            continue;
          }
          break;
        }
        expect_op("]");
        if (!slice && !parts[0]) template_error(line_, "empty subscript '[]'");  // the key would be evaluated
        auto x = make(slice ? Expr::Kind::kSlice : Expr::Kind::kIndex);
        x->args.push_back(std::move(e));
        for (auto& p : parts) x->args.push_back(std::move(p));
        e = std::move(x);
      } else if (accept_op("(")) {
        auto call = make(Expr::Kind::kCall);
        call->args.push_back(std::move(e));
        parse_call_args(*call);
        e = std::move(call);
      } else {
        return e;
      }
    }
  }
  ExprPtr parse_filters(ExprPtr e) {
    for (;;) {
      if (accept_op("|")) {
        auto f = make(Expr::Kind::kFilter);
        f->name = expect_identifier();
        f->args.push_back(std::move(e));
        if (accept_op("(")) parse_call_args(*f);
        e = std::move(f);
      } else if (accept_name("is")) {
        auto t = make(Expr::Kind::kTest);
        t->negated = accept_name("not");
        t->name = expect_identifier();
        t->args.push_back(std::move(e));
        if (accept_op("(")) {
          parse_call_args(*t);
        } else if (t_[i_].kind == Token::Kind::kString || t_[i_].kind == Token::Kind::kInt ||
                   (t_[i_].kind == Token::Kind::kName && !peek_name("and") && !peek_name("or") &&
                    !peek_name("else") && !peek_name("if"))) {
          t->args.push_back(parse_primary());  // `is sameas x`, `is equalto 3`
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int line_;
  int depth_ = 0;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Statements.

struct ChatTemplate::Node {
  enum class Kind { kBody, kText, kOutput, kIf, kFor, kSet } kind = Kind::kBody;
  int line = 0;
  std::string text;
  std::vector<std::unique_ptr<Node>> children;  // body
  // kIf: conditions[i] guards bodies[i]; a trailing extra body is the else branch.
  std::vector<ExprPtr> conditions;
  std::vector<std::unique_ptr<Node>> bodies;
  // kFor: loop variables, iterable, optional filter; bodies[0] body, bodies[1] else.
  std::vector<std::string> targets;
  ExprPtr expr;
  ExprPtr filter;
  // kSet: targets[0] (and attribute name in text when `set ns.attr = ...`).
};

namespace {

using Node = ChatTemplate::Node;
using NodePtr = std::unique_ptr<Node>;

struct Segment {
  enum class Kind { kText, kExpr, kStmt } kind;
  std::string content;
  int line;
};

// Splits the source into text / {{ }} / {% %} segments, applying whitespace control and HF's
// trim_blocks + lstrip_blocks, and Jinja's removal of one trailing newline.
std::vector<Segment> segment(const std::string& src) {
  std::vector<Segment> out;
  size_t at = 0;
  int line = 1;
  bool strip_next_text = false;  // after `-}}` / `-%}`
  bool trim_newline = false;     // after a block tag (trim_blocks)
  auto count_lines = [](std::string_view s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); };
  while (at <= src.size()) {
    size_t open = src.find('{', at);
    while (open != std::string::npos && open + 1 < src.size() && src[open + 1] != '{' && src[open + 1] != '%' &&
           src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open + 1 >= src.size()) open = std::string::npos;
    std::string text = src.substr(at, open == std::string::npos ? std::string::npos : open - at);
    if (trim_newline && !text.empty() && text[0] == '\n') text.erase(0, 1);
    if (strip_next_text) text.erase(0, text.find_first_not_of(" \t\r\n") == std::string::npos ? text.size()
                                                                                               : text.find_first_not_of(" \t\r\n"));
    if (open == std::string::npos) {
      if (!text.empty() && text.back() == '\n') text.pop_back();  // keep_trailing_newline=False
      if (!text.empty()) out.push_back({Segment::Kind::kText, text, line});
      break;
    }
    const char kind = src[open + 1];
    const bool strip_before = open + 2 < src.size() && src[open + 2] == '-';
    const bool keep_before = open + 2 < src.size() && src[open + 2] == '+';
    if (strip_before) {
      text.erase(text.find_last_not_of(" \t\r\n") == std::string::npos ? 0 : text.find_last_not_of(" \t\r\n") + 1);
    } else if (kind != '{' && !keep_before) {
      // lstrip_blocks: drop the spaces and tabs between a line start and a block or comment tag.
      // Only a newline since `at` matters; searching further back made long one-line templates quadratic.
      size_t last_newline = std::string_view(src).substr(at, open - at).rfind('\n');
      size_t line_begin = last_newline == std::string::npos ? at : at + last_newline + 1;
      bool at_line_start = line_begin > at || at == 0 || src[at - 1] == '\n';
      if (at_line_start && src.find_first_not_of(" \t", line_begin) >= open)
        text.resize(text.size() - std::min(text.size(), open - line_begin));
    }
    if (!text.empty()) out.push_back({Segment::Kind::kText, text, line});
    line += count_lines(src.substr(at, open - at));
    const std::string close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    size_t end = src.find(close, open + 2);
    if (end == std::string::npos)
      template_error(line, str_cat("unclosed '{", kind, "' (expected '", close, "')"));
    size_t inner_begin = open + 2 + ((strip_before || keep_before) ? 1 : 0);
    size_t inner_end = end;
    strip_next_text = end > inner_begin && src[end - 1] == '-';
    if (strip_next_text) --inner_end;
    std::string inner = src.substr(inner_begin, inner_end - inner_begin);
    if (kind == '{') out.push_back({Segment::Kind::kExpr, inner, line});
    if (kind == '%') out.push_back({Segment::Kind::kStmt, inner, line});
    trim_newline = kind != '{';
    line += count_lines(src.substr(open, end + 2 - open));
    at = end + 2;
  }
  return out;
}

class TemplateParser {
 public:
  explicit TemplateParser(std::vector<Segment> segments) : s_(std::move(segments)) {}

  NodePtr parse() {
    auto body = parse_body({});
    if (i_ < s_.size()) template_error(s_[i_].line, "unexpected '{% " + stmt_keyword(s_[i_]) + " %}'");
    return body;
  }

 private:
  static std::string stmt_keyword(const Segment& s) {
    size_t b = s.content.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    size_t e = s.content.find_first_of(" \t\r\n", b);
    return s.content.substr(b, e == std::string::npos ? std::string::npos : e - b);
  }

  // Parses until a statement whose keyword is in `stops` (left unconsumed) or the end.
  NodePtr parse_body(std::initializer_list<std::string_view> stops) {
    auto body = std::make_unique<Node>();
    while (i_ < s_.size()) {
      const Segment& seg = s_[i_];
      if (seg.kind == Segment::Kind::kText) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kText;
        n->line = seg.line;
        n->text = seg.content;
        body->children.push_back(std::move(n));
        ++i_;
      } else if (seg.kind == Segment::Kind::kExpr) {
        ExprParser p(lex_expression(seg.content, seg.line), seg.line);
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kOutput;
        n->line = seg.line;
        n->expr = p.parse_expression();
        p.expect_end("{{ }}");
        body->children.push_back(std::move(n));
        ++i_;
      } else {
        std::string kw = stmt_keyword(seg);
        if (std::find(stops.begin(), stops.end(), kw) != stops.end()) return body;
        body->children.push_back(parse_statement(kw));
      }
    }
    return body;
  }

  NodePtr parse_statement(const std::string& kw) {
    const Segment& seg = s_[i_];
    if (depth_ >= kMaxNesting) template_error(seg.line, str_cat("blocks nested more than ", kMaxNesting, " levels deep"));
    ++depth_;
    struct Leave {
      int& depth;
      ~Leave() { --depth; }
    } leave{depth_};
    ExprParser p(lex_expression(seg.content, seg.line), seg.line);
    p.expect_identifier();  // the keyword
    auto n = std::make_unique<Node>();
    n->line = seg.line;
    if (kw == "if") {
      n->kind = Node::Kind::kIf;
      n->conditions.push_back(p.parse_expression());
      p.expect_end("{% if %}");
      ++i_;
      for (;;) {
        n->bodies.push_back(parse_body({"elif", "else", "endif"}));
        if (i_ >= s_.size()) template_error(seg.line, "{% if %} without {% endif %}");
        std::string next = stmt_keyword(s_[i_]);
        ExprParser q(lex_expression(s_[i_].content, s_[i_].line), s_[i_].line);
        q.expect_identifier();
        ++i_;
        if (next == "elif") {
          n->conditions.push_back(q.parse_expression());
          q.expect_end("{% elif %}");
        } else if (next == "else") {
          q.expect_end("{% else %}");
          n->bodies.push_back(parse_body({"endif"}));
          if (i_ >= s_.size()) template_error(seg.line, "{% if %} without {% endif %}");
          ++i_;
          break;
        } else {
          break;  // endif
        }
      }
    } else if (kw == "for") {
      n->kind = Node::Kind::kFor;
      do n->targets.push_back(p.expect_identifier());
      while (p.accept_op(","));
      if (!p.accept_name("in")) template_error(seg.line, "expected 'in' in {% for %}");
      n->expr = p.parse_without_condition();  // `for x in xs if cond`: the `if` filters
      if (p.accept_name("if")) n->filter = p.parse_expression();
      if (p.accept_name("recursive")) template_error(seg.line, "recursive loops are not supported");
      p.expect_end("{% for %}");
      ++i_;
      n->bodies.push_back(parse_body({"else", "endfor"}));
      if (i_ >= s_.size()) template_error(seg.line, "{% for %} without {% endfor %}");
      if (stmt_keyword(s_[i_]) == "else") {
        ++i_;
        n->bodies.push_back(parse_body({"endfor"}));
        if (i_ >= s_.size()) template_error(seg.line, "{% for %} without {% endfor %}");
      }
      ++i_;
    } else if (kw == "set") {
      n->kind = Node::Kind::kSet;
      n->targets.push_back(p.expect_identifier());
      if (p.accept_op(".")) n->text = p.expect_identifier();
      if (!p.accept_op("=")) template_error(seg.line, "block {% set %} ... {% endset %} is not supported");
      n->expr = p.parse_expression();
      p.expect_end("{% set %}");
      ++i_;
    } else {
      template_error(seg.line, str_cat("'{% ", kw, " %}' is not supported by this engine's template subset ",
                                       "(supported: if/elif/else, for, set)"));
    }
    return n;
  }

 private:
  std::vector<Segment> s_;
  size_t i_ = 0;
  int depth_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Evaluation.

class Renderer {
 public:
  explicit Renderer(const Json& globals) { scopes_.push_back(globals); }

  void render(const Node& n, std::string& out) {
    switch (n.kind) {
      case Node::Kind::kBody:
        for (const auto& c : n.children) render(*c, out);
        break;
      case Node::Kind::kText:
        out += n.text;
        check_string_size(out.size(), n.line);
        break;
      case Node::Kind::kOutput:
        out += to_str(eval(*n.expr));
        check_string_size(out.size(), n.line);
        break;
      case Node::Kind::kIf:
        for (size_t k = 0; k < n.conditions.size(); ++k)
          if (truthy(eval(*n.conditions[k]))) {
            render(*n.bodies[k], out);
            return;
          }
        if (n.bodies.size() > n.conditions.size()) render(*n.bodies.back(), out);
        break;
      case Node::Kind::kFor: render_for(n, out); break;
      case Node::Kind::kSet: {
        Value v = eval(*n.expr);
        // Values only grow from one loop iteration to the next through {% set %}.
        if (value_depth(v.j, kMaxValueDepth) > kMaxValueDepth)
          template_error(n.line, str_cat("{% set %} stores a value nested more than ", kMaxValueDepth, " levels deep"));
        if (n.text.empty()) {
          scopes_.back()[n.targets[0]] = v.j;
        } else {
          Json* ns = find_variable(n.targets[0]);
          if (!ns || !ns->is_object()) template_error(n.line, "'" + n.targets[0] + "' is not a namespace");
          (*ns)[n.text] = v.j;
        }
        break;
      }
    }
  }

 private:
  Json* find_variable(const std::string& name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return &*f;
    }
    return nullptr;
  }

  void render_for(const Node& n, std::string& out) {
    Value seq = eval(*n.expr);
    std::vector<Json> items;
    if (seq.j.is_array()) {
      items.assign(seq.j.begin(), seq.j.end());
    } else if (seq.j.is_object()) {
      for (auto it = seq.j.begin(); it != seq.j.end(); ++it) items.push_back(it.key());
    } else if (seq.j.is_string()) {
      const std::string& s = seq.j.get_ref<const std::string&>();
      for (size_t i = 0; i < s.size();) {
        int len = utf8::char_length(s, i);
        items.push_back(s.substr(i, len));
        i += len;
      }
    } else if (!seq.undefined && !seq.j.is_null()) {
      template_error(n.line, "cannot iterate over " + to_str(seq));
    }
    auto bind = [&](Json& scope, const Json& item) {
      if (n.targets.size() == 1) {
        scope[n.targets[0]] = item;
        return;
      }
      if (!item.is_array() || item.size() != n.targets.size())
        template_error(n.line, "cannot unpack " + to_str(item, true) + " into " + std::to_string(n.targets.size()) + " names");
      for (size_t k = 0; k < n.targets.size(); ++k) scope[n.targets[k]] = item[k];
    };
    if (n.filter) {  // `for x in xs if cond`: loop.* counts only the kept items
      std::vector<Json> kept;
      for (const auto& item : items) {
        scopes_.emplace_back(Json::object());
        bind(scopes_.back(), item);
        bool keep = truthy(eval(*n.filter));
        scopes_.pop_back();
        if (keep) kept.push_back(item);
      }
      items.swap(kept);
    }
    if (items.empty()) {
      if (n.bodies.size() > 1) render(*n.bodies[1], out);
      return;
    }
    const int64_t length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      scopes_.emplace_back(Json::object());
      Json& scope = scopes_.back();
      bind(scope, items[i]);
      Json loop = Json::object();
      loop["index"] = i + 1;
      loop["index0"] = i;
      loop["revindex"] = length - i;
      loop["revindex0"] = length - i - 1;
      loop["first"] = i == 0;
      loop["last"] = i == length - 1;
      loop["length"] = length;
      if (i > 0) loop["previtem"] = items[i - 1];
      if (i + 1 < length) loop["nextitem"] = items[i + 1];
      scope["loop"] = std::move(loop);
      render(*n.bodies[0], out);
      scopes_.pop_back();
    }
  }

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral: return {e.literal};
      case Expr::Kind::kName: {
        if (Json* v = find_variable(e.name)) return {*v};
        return Value::undef();
      }
      case Expr::Kind::kList: {
        Json a = Json::array();
        for (const auto& x : e.args) a.push_back(eval(*x).j);
        return {a};
      }
      case Expr::Kind::kDict: {
        Json d = Json::object();
        for (size_t k = 0; k + 1 < e.args.size(); k += 2) d[to_str(eval(*e.args[k]))] = eval(*e.args[k + 1]).j;
        return {d};
      }
      case Expr::Kind::kAttr: {
        Value obj = eval(*e.args[0]);
        if (obj.j.is_object()) {
          auto it = obj.j.find(e.name);
          if (it != obj.j.end()) return {*it};
        }
        return Value::undef();
      }
      case Expr::Kind::kIndex: return index(eval(*e.args[0]), eval(*e.args[1]), e.line);
      case Expr::Kind::kSlice: return slice(e);
      case Expr::Kind::kCall: return call(e);
      case Expr::Kind::kFilter: return filter(e);
      case Expr::Kind::kTest: {
        bool r = test(e);
        return {Json(e.negated ? !r : r)};
      }
      case Expr::Kind::kUnary: {
        Value v = eval(*e.args[0]);
        if (e.name == "not") return {Json(!truthy(v))};
        if (v.j.is_number_float()) return {Json(-v.j.get<double>())};
        if (v.j.is_number()) {
          int64_t r = 0;
          if (__builtin_sub_overflow(int64_t{0}, int_arg(v.j, INT64_MIN, INT64_MAX, "an operand", e.line), &r))
            template_error(e.line, "integer overflow in unary minus");
          return {Json(r)};
        }
        template_error(e.line, "unary minus needs a number, found " + to_str(v));
      }
      case Expr::Kind::kBinary: return binary(e);
      case Expr::Kind::kTernary:
        if (truthy(eval(*e.args[0]))) return eval(*e.args[1]);
        return e.args[2] ? eval(*e.args[2]) : Value::undef();
    }
    return Value::undef();
  }

  static Value index(const Value& obj, const Value& key, int line) {
    if (obj.j.is_object()) {
      if (!key.j.is_string()) return Value::undef();
      auto it = obj.j.find(key.j.get<std::string>());
      return it == obj.j.end() ? Value::undef() : Value{*it};
    }
    if ((obj.j.is_array() || obj.j.is_string()) && key.j.is_number_integer()) {
      // A context's unsigned key past 2^63 - 1 is out of range (read as int64_t it would wrap negative).
      const std::optional<int64_t> key_value = json_integer(key.j, INT64_MIN, INT64_MAX);
      if (!key_value) return Value::undef();
      int64_t n = obj.j.is_array() ? static_cast<int64_t>(obj.j.size())
                                   : static_cast<int64_t>(obj.j.get_ref<const std::string&>().size());
      int64_t i = *key_value;
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undef();
      if (obj.j.is_array()) return {obj.j[i]};
      return {Json(obj.j.get_ref<const std::string&>().substr(i, 1))};
    }
    if (obj.undefined) return Value::undef();
    template_error(line, "cannot subscript " + to_str(obj.j, true) + " with " + to_str(key.j, true));
  }

  Value slice(const Expr& e) {
    Value obj = eval(*e.args[0]);
    auto bound = [&](int k) -> std::optional<int64_t> {
      if (!e.args[k]) return std::nullopt;
      Value v = eval(*e.args[k]);
      if (v.j.is_null() || v.undefined) return std::nullopt;
      return int_arg(v.j, INT64_MIN, INT64_MAX, "a slice bound", e.line);
    };
    std::optional<int64_t> start = bound(1), stop = bound(2), step_opt = bound(3);
    int64_t step = step_opt.value_or(1);
    if (step == 0) template_error(e.line, "slice step cannot be zero");
    std::vector<Json> items;
    bool is_string = obj.j.is_string();
    if (obj.j.is_array()) {
      items.assign(obj.j.begin(), obj.j.end());
    } else if (is_string) {
      for (char c : obj.j.get_ref<const std::string&>()) items.push_back(std::string(1, c));
    } else {
      template_error(e.line, "cannot slice " + to_str(obj));
    }
    const int64_t n = static_cast<int64_t>(items.size());
    auto clamp = [&](std::optional<int64_t> v, int64_t dflt, int64_t lo, int64_t hi) {
      if (!v) return dflt;
      int64_t x = *v < 0 ? *v + n : *v;
      return std::clamp(x, lo, hi);
    };
    Json result = Json::array();
    std::string s;
    // A step past the end stops at the end: i + step could overflow.
    if (step > 0) {
      for (int64_t i = clamp(start, 0, 0, n), end = clamp(stop, n, 0, n); i < end; i = step >= end - i ? end : i + step)
        is_string ? void(s += items[i].get<std::string>()) : result.push_back(items[i]);
    } else {
      for (int64_t i = clamp(start, n - 1, -1, n - 1), end = clamp(stop, -1, -1, n - 1); i > end;
           i = step <= end - i ? end : i + step)
        is_string ? void(s += items[i].get<std::string>()) : result.push_back(items[i]);
    }
    return is_string ? Value{Json(s)} : Value{result};
  }

  std::vector<Value> positional(const Expr& e, size_t first) {
    std::vector<Value> v;
    for (size_t k = first; k < e.args.size() - e.kwarg_names.size(); ++k) v.push_back(eval(*e.args[k]));
    return v;
  }
  std::optional<Value> kwarg(const Expr& e, std::string_view name) {
    size_t first_kw = e.args.size() - e.kwarg_names.size();
    for (size_t k = 0; k < e.kwarg_names.size(); ++k)
      if (e.kwarg_names[k] == name) return eval(*e.args[first_kw + k]);
    return std::nullopt;
  }

  Value call(const Expr& e) {
    const Expr& callee = *e.args[0];
    if (callee.kind == Expr::Kind::kName && !find_variable(callee.name)) {
      if (callee.name == "raise_exception") {
        auto args = positional(e, 1);
        fail("chat template raised an exception: ", args.empty() ? std::string() : to_str(args[0]));
      }
      if (callee.name == "namespace" || callee.name == "dict") {
        Json ns = Json::object();
        size_t first_kw = e.args.size() - e.kwarg_names.size();
        for (size_t k = 0; k < e.kwarg_names.size(); ++k) ns[e.kwarg_names[k]] = eval(*e.args[first_kw + k]).j;
        return {ns};
      }
      if (callee.name == "range") {
        auto args = positional(e, 1);
        auto arg = [&](size_t k) { return int_arg(args[k].j, INT64_MIN, INT64_MAX, "a range() argument", e.line); };
        int64_t start = 0, stop = 0, step = 1;
        if (args.size() == 1) {
          stop = arg(0);
        } else if (args.size() >= 2) {
          start = arg(0);
          stop = arg(1);
          if (args.size() == 3) step = arg(2);
        }
        if (step == 0) template_error(e.line, "range() step cannot be zero");
        // Counted in 128 bits: stop - start can overflow 64.
        const __int128 span = step > 0 ? __int128{stop} - start : __int128{start} - stop;
        const __int128 abs_step = step > 0 ? __int128{step} : -__int128{step};
        const __int128 count = span <= 0 ? 0 : (span + abs_step - 1) / abs_step;
        if (count > kMaxRangeItems)
          template_error(e.line, str_cat("range() of more than ", kMaxRangeItems, " items (Jinja's sandbox refuses "
                                         "them too)"));
        Json r = Json::array();
        for (int64_t k = 0; k < static_cast<int64_t>(count); ++k) r.push_back(static_cast<int64_t>(start + k * __int128{step}));
        return {r};
      }
      if (callee.name == "strftime_now") {
        auto args = positional(e, 1);
        std::string format = args.empty() ? std::string("%Y-%m-%d") : to_str(args[0]);
        std::time_t now = std::time(nullptr);
        std::tm local{};
        localtime_r(&now, &local);
        char buf[256];
        size_t n = std::strftime(buf, sizeof(buf), format.c_str(), &local);
        return {Json(std::string(buf, n))};
      }
      template_error(e.line, "function '" + callee.name +
                                 "' is not supported (supported: raise_exception, namespace, range, dict, strftime_now)");
    }
    if (callee.kind != Expr::Kind::kAttr) template_error(e.line, "only functions and methods can be called");
    Value obj = eval(*callee.args[0]);
    const std::string& m = callee.name;
    auto args = positional(e, 1);
    auto arg_str = [&](size_t k) {
      if (k >= args.size() || !args[k].j.is_string()) template_error(e.line, m + "() needs a string argument");
      return args[k].j.get<std::string>();
    };
    if (obj.j.is_string()) {
      std::string s = obj.j.get<std::string>();
      auto strip_chars = args.empty() || args[0].j.is_null() ? std::string(" \t\r\n\v\f") : arg_str(0);
      if (m == "strip" || m == "lstrip" || m == "rstrip") {
        size_t b = 0, en = s.size();
        if (m != "rstrip")
          while (b < en && strip_chars.find(s[b]) != std::string::npos) ++b;
        if (m != "lstrip")
          while (en > b && strip_chars.find(s[en - 1]) != std::string::npos) --en;
        return {Json(s.substr(b, en - b))};
      }
      if (m == "startswith") return {Json(s.starts_with(arg_str(0)))};
      if (m == "endswith") return {Json(s.ends_with(arg_str(0)))};
      if (m == "upper" || m == "lower") return {Json(change_case(s, m == "upper"))};
      if (m == "title" || m == "capitalize") return {Json(title_case(s, m == "title"))};
      if (m == "replace") return {Json(replace_all(s, arg_str(0), arg_str(1), e.line))};
      if (m == "find") return {Json(static_cast<int64_t>(s.find(arg_str(0)) == std::string::npos ? -1 : s.find(arg_str(0))))};
      if (m == "split") return {Json(split(s, args.empty() || args[0].j.is_null() ? std::string() : arg_str(0)))};
    }
    if (obj.j.is_object()) {
      if (m == "items") {
        Json r = Json::array();
        for (auto it = obj.j.begin(); it != obj.j.end(); ++it) r.push_back(Json::array({it.key(), it.value()}));
        return {r};
      }
      if (m == "keys" || m == "values") {
        Json r = Json::array();
        for (auto it = obj.j.begin(); it != obj.j.end(); ++it) r.push_back(m == "keys" ? Json(it.key()) : it.value());
        return {r};
      }
      if (m == "get") {
        auto it = args.empty() ? obj.j.end() : obj.j.find(to_str(args[0]));
        if (it != obj.j.end()) return {*it};
        return args.size() > 1 ? args[1] : Value{Json()};
      }
    }
    template_error(e.line, "method '" + m + "' is not supported on " + std::string(obj.undefined ? "an undefined value" : obj.j.type_name()));
  }

  static std::string change_case(std::string s, bool upper) {
    for (char& c : s) c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
    return s;
  }
  static std::string title_case(std::string s, bool every_word) {
    bool start = true;
    for (char& c : s) {
      unsigned char u = static_cast<unsigned char>(c);
      c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
      start = every_word ? !std::isalnum(u) : false;
    }
    return s;
  }
  static std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int line) {
    if (from.empty()) return s;
    std::string out;
    size_t at = 0;
    for (size_t hit; (hit = s.find(from, at)) != std::string::npos; at = hit + from.size()) {
      out += s.substr(at, hit - at) + to;
      check_string_size(out.size(), line);
    }
    return out + s.substr(at);
  }
  static Json split(const std::string& s, const std::string& sep) {
    Json r = Json::array();
    if (sep.empty()) {  // Python's split(): runs of whitespace
      size_t i = 0;
      while (i < s.size()) {
        while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
        size_t b = i;
        while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
        if (i > b) r.push_back(s.substr(b, i - b));
      }
      return r;
    }
    size_t at = 0;
    for (size_t hit; (hit = s.find(sep, at)) != std::string::npos; at = hit + sep.size()) r.push_back(s.substr(at, hit - at));
    r.push_back(s.substr(at));
    return r;
  }

  Value filter(const Expr& e) {
    Value v = eval(*e.args[0]);
    auto args = positional(e, 1);
    const std::string& f = e.name;
    if (f == "trim") {
      std::string s = to_str(v);
      size_t b = s.find_first_not_of(" \t\r\n\v\f");
      if (b == std::string::npos) return {Json("")};
      size_t en = s.find_last_not_of(" \t\r\n\v\f");
      return {Json(s.substr(b, en - b + 1))};
    }
    if (f == "length" || f == "count") {
      if (v.j.is_string()) {
        const std::string& s = v.j.get_ref<const std::string&>();
        int64_t n = 0;
        for (size_t i = 0; i < s.size(); i += utf8::char_length(s, i)) ++n;
        return {Json(n)};
      }
      if (v.j.is_array() || v.j.is_object()) return {Json(static_cast<int64_t>(v.j.size()))};
      return {Json(0)};
    }
    if (f == "tojson") {
      int indent = -1;
      if (auto k = kwarg(e, "indent"); k && k->j.is_number())
        indent = static_cast<int>(int_arg(k->j, -1, 1024, "tojson's indent", e.line));
      if (!args.empty() && args[0].j.is_number())
        indent = static_cast<int>(int_arg(args[0].j, -1, 1024, "tojson's indent", e.line));
      std::string out;
      dump_python_json(v.j, indent, 0, out);
      return {Json(out)};
    }
    if (f == "upper" || f == "lower") return {Json(change_case(to_str(v), f == "upper"))};
    if (f == "capitalize" || f == "title") return {Json(title_case(to_str(v), f == "title"))};
    if (f == "string") return {Json(to_str(v))};
    if (f == "safe" || f == "e" || f == "escape") {
      if (f != "safe") template_error(e.line, "filter 'escape' is not supported");
      return v;
    }
    if (f == "default" || f == "d") {
      bool boolean = (args.size() > 1 && truthy(args[1])) || (kwarg(e, "boolean") && truthy(*kwarg(e, "boolean")));
      if (v.undefined || (boolean && !truthy(v))) return args.empty() ? Value{Json("")} : args[0];
      return v;
    }
    if (f == "first" || f == "last") {
      if (v.j.is_array()) return v.j.empty() ? Value::undef() : Value{f == "first" ? v.j.front() : v.j.back()};
      if (v.j.is_string()) {
        const std::string& s = v.j.get_ref<const std::string&>();
        return s.empty() ? Value::undef() : Value{Json(f == "first" ? s.substr(0, 1) : s.substr(s.size() - 1))};
      }
      return Value::undef();
    }
    if (f == "join") {
      std::string sep = args.empty() ? "" : to_str(args[0]);
      std::string out;
      if (v.j.is_array())
        for (size_t k = 0; k < v.j.size(); ++k) {
          out += (k ? sep : "") + to_str(v.j[k]);
          check_string_size(out.size(), e.line);
        }
      return {Json(out)};
    }
    if (f == "int") {
      if (v.j.is_number_integer()) return v;
      if (v.j.is_number()) {
        // Truncation toward zero, for values a 64-bit integer holds (the conversion of others is undefined).
        const double d = v.j.get<double>();
        if (!(d > -9.2e18 && d < 9.2e18)) template_error(e.line, str_cat("int of ", python_float(d), " is out of range"));
        return {Json(static_cast<int64_t>(d))};
      }
      if (v.j.is_string()) {
        int64_t x = 0;
        auto s = v.j.get<std::string>();
        std::from_chars(s.data(), s.data() + s.size(), x);
        return {Json(x)};
      }
      return {Json(0)};
    }
    if (f == "float") return {Json(v.j.is_number() ? v.j.get<double>() : 0.0)};
    if (f == "abs") {
      if (v.j.is_number_float()) return {Json(std::fabs(v.j.get<double>()))};
      return {Json(std::llabs(int_arg(v.j, -INT64_MAX, INT64_MAX, "abs's argument", e.line)))};
    }
    if (f == "list") {
      if (v.j.is_array()) return v;
      Json r = Json::array();
      if (v.j.is_string())
        for (char c : v.j.get<std::string>()) r.push_back(std::string(1, c));
      if (v.j.is_object())
        for (auto it = v.j.begin(); it != v.j.end(); ++it) r.push_back(it.key());
      return {r};
    }
    if (f == "items") {
      Json r = Json::array();
      if (v.j.is_object())
        for (auto it = v.j.begin(); it != v.j.end(); ++it) r.push_back(Json::array({it.key(), it.value()}));
      return {r};
    }
    if (f == "replace") {
      if (args.size() < 2) template_error(e.line, "replace needs two arguments");
      return {Json(replace_all(to_str(v), to_str(args[0]), to_str(args[1]), e.line))};
    }
    if (f == "selectattr" || f == "rejectattr") {
      if (args.empty()) template_error(e.line, f + " needs an attribute name");
      std::string attr = to_str(args[0]);
      Json r = Json::array();
      if (v.j.is_array()) {
        for (const auto& item : v.j) {
          Value a = item.is_object() && item.contains(attr) ? Value{item[attr]} : Value::undef();
          bool ok;
          if (args.size() == 1) {
            ok = truthy(a);
          } else {
            std::string test_name = to_str(args[1]);
            ok = apply_test(test_name, a, args.size() > 2 ? &args[2] : nullptr, e.line);
          }
          if (ok == (f == "selectattr")) r.push_back(item);
        }
      }
      return {r};
    }
    if (f == "map") {
      auto attr = kwarg(e, "attribute");
      Json r = Json::array();
      if (v.j.is_array()) {
        for (const auto& item : v.j) {
          if (attr) {
            std::string a = to_str(*attr);
            r.push_back(item.is_object() && item.contains(a) ? item[a] : Json());
          } else if (!args.empty() && to_str(args[0]) == "string") {
            r.push_back(to_str(item));
          } else {
            template_error(e.line, "map() is supported with attribute= or 'string' only");
          }
        }
      }
      return {r};
    }
    if (f == "indent") {
      const int width = args.empty() ? 4 : static_cast<int>(int_arg(args[0].j, 0, 1024, "indent's width", e.line));
      std::string s = to_str(v), pad(static_cast<size_t>(width), ' '), out;
      check_string_size(s.size() + static_cast<size_t>(std::count(s.begin(), s.end(), '\n')) * pad.size(), e.line);
      for (size_t k = 0; k < s.size(); ++k) {
        out += s[k];
        if (s[k] == '\n' && k + 1 < s.size()) out += pad;
      }
      return {Json(out)};
    }
    template_error(e.line, "filter '" + f + "' is not supported");
  }

  static bool is_builtin_function(const std::string& name) {
    return name == "raise_exception" || name == "namespace" || name == "range" || name == "dict" ||
           name == "strftime_now";
  }

  bool test(const Expr& e) {
    const Expr& subject = *e.args[0];
    // HF defines its helper functions as globals: `strftime_now is defined` holds.
    if (subject.kind == Expr::Kind::kName && !find_variable(subject.name) && is_builtin_function(subject.name) &&
        (e.name == "defined" || e.name == "undefined"))
      return e.name == "defined";
    Value v = eval(subject);
    std::optional<Value> arg;
    if (e.args.size() > 1) arg = eval(*e.args[1]);
    return apply_test(e.name, v, arg ? &*arg : nullptr, e.line);
  }

  static bool apply_test(const std::string& t, const Value& v, const Value* arg, int line) {
    if (t == "defined") return !v.undefined;
    if (t == "undefined") return v.undefined;
    if (t == "none") return !v.undefined && v.j.is_null();
    if (t == "string") return v.j.is_string();
    if (t == "number") return v.j.is_number();
    if (t == "integer") return v.j.is_number_integer();
    if (t == "float") return v.j.is_number_float();
    if (t == "boolean") return v.j.is_boolean();
    if (t == "true") return v.j.is_boolean() && v.j.get<bool>();
    if (t == "false") return v.j.is_boolean() && !v.j.get<bool>();
    if (t == "mapping") return v.j.is_object();
    if (t == "sequence" || t == "iterable") return v.j.is_array() || v.j.is_string() || v.j.is_object();
    if (t == "even" || t == "odd") return v.j.is_number_integer() && (v.j.get<int64_t>() % 2 == 0) == (t == "even");
    if (t == "equalto" || t == "eq" || t == "==" || t == "sameas") return arg && values_equal(v, *arg);
    if (t == "ne" || t == "!=") return arg && !values_equal(v, *arg);
    template_error(line, "test '" + t + "' is not supported");
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    if (op == "and") {
      Value a = eval(*e.args[0]);
      return truthy(a) ? eval(*e.args[1]) : a;
    }
    if (op == "or") {
      Value a = eval(*e.args[0]);
      return truthy(a) ? a : eval(*e.args[1]);
    }
    Value a = eval(*e.args[0]), b = eval(*e.args[1]);
    if (op == "~") {
      std::string s = to_str(a);
      const std::string right = to_str(b);
      check_string_size(s.size() + right.size(), e.line);
      return {Json(s + right)};
    }
    if (op == "==") return {Json(values_equal(a, b))};
    if (op == "!=") return {Json(!values_equal(a, b))};
    if (op == "in" || op == "not in") {
      bool r = false;
      if (b.j.is_string()) {
        r = b.j.get_ref<const std::string&>().find(to_str(a)) != std::string::npos;
      } else if (b.j.is_array()) {
        r = std::any_of(b.j.begin(), b.j.end(), [&](const Json& x) { return values_equal(Value{x}, a); });
      } else if (b.j.is_object()) {
        r = a.j.is_string() && b.j.contains(a.j.get<std::string>());
      } else if (!b.undefined && !b.j.is_null()) {
        template_error(e.line, "'in' needs a string, list or mapping on its right");
      }
      return {Json(op == "in" ? r : !r)};
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int c;
      if (a.j.is_string() && b.j.is_string()) {
        c = a.j.get<std::string>().compare(b.j.get<std::string>());
      } else if (a.j.is_number() && b.j.is_number()) {
        double x = a.j.get<double>(), y = b.j.get<double>();
        c = x < y ? -1 : x > y ? 1 : 0;
      } else {
        template_error(e.line, "cannot compare " + to_str(a.j, true) + " " + op + " " + to_str(b.j, true));
      }
      bool r = op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0;
      return {Json(r)};
    }
    if (op == "+") {
      if (a.j.is_string() && b.j.is_string()) {
        check_string_size(a.j.get_ref<const std::string&>().size() + b.j.get_ref<const std::string&>().size(), e.line);
        return {Json(a.j.get<std::string>() + b.j.get<std::string>())};
      }
      if (a.j.is_array() && b.j.is_array()) {
        check_list_size(a.j.size() + b.j.size(), e.line);
        Json r = a.j;
        for (const auto& x : b.j) r.push_back(x);
        return {r};
      }
    }
    if (op == "*" && a.j.is_string() && b.j.is_number_integer()) {
      const std::string& s = a.j.get_ref<const std::string&>();
      const int64_t times = std::max<int64_t>(int_arg(b.j, INT64_MIN, INT64_MAX, "a repeat count", e.line), 0);
      if (!s.empty() && static_cast<uint64_t>(times) > kMaxStringBytes / s.size())
        template_error(e.line, str_cat("repeating a ", s.size(), "-byte string ", times, " times builds more than the ",
                                       kMaxStringBytes, " bytes supported"));
      std::string r;
      for (int64_t k = 0; k < times && !s.empty(); ++k) r += s;
      return {Json(r)};
    }
    if (!a.j.is_number() || !b.j.is_number())
      template_error(e.line, "operator '" + op + "' cannot combine " + to_str(a.j, true) + " and " + to_str(b.j, true));
    const bool ints = a.j.is_number_integer() && b.j.is_number_integer();
    if (ints && op != "/") {
      const int64_t x = int_arg(a.j, INT64_MIN, INT64_MAX, "an operand", e.line);
      const int64_t y = int_arg(b.j, INT64_MIN, INT64_MAX, "an operand", e.line);
      if ((op == "//" || op == "%") && y == 0) template_error(e.line, "division by zero");
      // Python's integers do not overflow; ours stop with an error instead of wrapping (or trapping,
      // as INT64_MIN / -1 does on x86).
      int64_t r = 0;
      const bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &r)
                            : op == "-" ? __builtin_sub_overflow(x, y, &r)
                            : op == "*" ? __builtin_mul_overflow(x, y, &r)
                                        : x == INT64_MIN && y == -1;
      if (overflow) template_error(e.line, str_cat("integer overflow in ", x, " ", op, " ", y));
      if (op == "+" || op == "-" || op == "*") return {Json(r)};
      int64_t q = x / y - ((x % y != 0) && ((x < 0) != (y < 0)) ? 1 : 0);  // Python floors
      if (op == "//") return {Json(q)};
      int64_t m = x % y;  // takes the divisor's sign, as Python's; x - q * y could overflow
      if (m != 0 && (m < 0) != (y < 0)) m += y;
      return {Json(m)};
    }
    double x = a.j.get<double>(), y = b.j.get<double>();
    if (op == "+") return {Json(x + y)};
    if (op == "-") return {Json(x - y)};
    if (op == "*") return {Json(x * y)};
    if (y == 0) template_error(e.line, "division by zero");
    if (op == "/") return {Json(x / y)};
    if (op == "//") return {Json(std::floor(x / y))};
    return {Json(x - std::floor(x / y) * y)};
  }

  std::vector<Json> scopes_;
};

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source) {
  TemplateParser parser(segment(source));
  root_ = parser.parse();
}
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const Json& context) const {
  Renderer r(context.is_object() ? context : Json::object());
  std::string out;
  try {
    r.render(*root_, out);
  } catch (const nlohmann::json::exception& e) {
    // A value of the wrong type where the interpreter reads one (e.g. `'a' | abs`).
    fail("chat template: ", e.what());
  }
  return out;
}

std::string apply_chat_template(const Tokenizer& tokenizer, const Json& messages, bool add_generation_prompt,
                                const Json& extra) {
  FUSELM_CHECK(!tokenizer.chat_template().empty(),
               "this tokenizer ships no chat template (looked for tokenizer_config.json \"chat_template\", "
               "chat_template.jinja, GGUF tokenizer.chat_template); render the prompt yourself");
  FUSELM_CHECK(messages.is_array(), "chat messages must be a JSON array of {\"role\", \"content\"} objects, found ",
               messages.type_name());
  Json context = extra.is_object() ? extra : Json::object();
  context["messages"] = messages;
  context["add_generation_prompt"] = add_generation_prompt;
  if (tokenizer.bos_id() >= 0) context["bos_token"] = tokenizer.token_text(tokenizer.bos_id());
  auto eos = tokenizer.eos_ids();
  if (!eos.empty()) context["eos_token"] = tokenizer.token_text(eos[0]);
  return ChatTemplate(tokenizer.chat_template()).render(context);
}

}  // namespace fuselm
