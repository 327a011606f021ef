#include "lathe/text/split_regex.h"

#include <climits>

#include "lathe/core/error.h"
#include "lathe/text/unicode_text.h"

namespace lathe {

struct SplitRegex::Node {
  enum class Kind { alternation, sequence, characters, negative_lookahead, positive_lookahead };
  struct Item {
    enum class Kind { range, category, white_space } kind;
    uint32_t low = 0, high = 0;  // range
    char major = 0, minor = 0;   // category; minor 0 = any minor
    bool negated = false;        // \S, \P{..}
  };
  Kind kind = Kind::sequence;
  std::vector<Node> children;  // alternation: alternatives; sequence: items; lookahead: one alternation
  std::vector<Item> items;     // characters: matches when any item matches (or none, when negated)
  bool negated = false;
  bool case_insensitive = false;
  int min = 1, max = 1;  // quantifier; max INT_MAX = unbounded
};

namespace {

using Node = SplitRegex::Node;

// A non-owning reference to a callable bool(size_t), cheaper than std::function on the hot path.
class Continuation {
 public:
  template <class Callable>
  Continuation(const Callable& callable)  // NOLINT: implicit by design
      : object_(&callable),
        call_([](const void* object, size_t position) { return (*static_cast<const Callable*>(object))(position); }) {}
  bool operator()(size_t position) const { return call_(object_, position); }

 private:
  const void* object_;
  bool (*call_)(const void*, size_t);
};

uint32_t simple_fold(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c == 0x17F) return 's';
  if (c == 0x212A) return 'k';
  return c;
}

bool item_matches(const Node::Item& item, uint32_t c) {
  bool hit = false;
  switch (item.kind) {
    case Node::Item::Kind::range:
      hit = c >= item.low && c <= item.high;
      break;
    case Node::Item::Kind::category: {
      UnicodeCategory category = unicode_category(c);
      hit = category.major == item.major && (item.minor == 0 || category.minor == item.minor);
      break;
    }
    case Node::Item::Kind::white_space:
      hit = is_unicode_white_space(c);
      break;
  }
  return hit != item.negated;
}

bool characters_match(const Node& node, uint32_t c) {
  bool hit = false;
  for (const Node::Item& item : node.items) {
    if (item_matches(item, c)) {
      hit = true;
      break;
    }
  }
  if (!hit && node.case_insensitive) {
    uint32_t folded = simple_fold(c);
    for (const Node::Item& item : node.items) {
      if (item.kind == Node::Item::Kind::range && folded != c && item_matches(item, folded)) {
        hit = true;
        break;
      }
      // An upper-case range item ('S') also matches its lower-case letter ('s').
      if (item.kind == Node::Item::Kind::range && item.low == item.high && simple_fold(item.low) == folded) {
        hit = true;
        break;
      }
    }
  }
  return hit != node.negated;
}

class Matcher {
 public:
  explicit Matcher(const std::vector<uint32_t>& text) : text_(text) {}

  bool match(const Node& node, size_t position, Continuation next) const {
    if (node.kind == Node::Kind::characters) {
      size_t run = 0;
      while (run < static_cast<size_t>(node.max) && position + run < text_.size() &&
             characters_match(node, text_[position + run]))
        ++run;
      for (size_t count = run + 1; count-- > static_cast<size_t>(node.min);)
        if (next(position + count)) return true;
      return false;
    }
    if (node.min == 1 && node.max == 1) return match_once(node, position, next);
    return match_repeated(node, 0, position, next);
  }

 private:
  bool match_repeated(const Node& node, int count, size_t position, Continuation next) const {
    if (count < node.max) {
      auto again = [&](size_t end) {
        return end != position && match_repeated(node, count + 1, end, next);  // no empty iterations
      };
      if (match_once(node, position, again)) return true;
    }
    return count >= node.min && next(position);
  }

  bool match_once(const Node& node, size_t position, Continuation next) const {
    switch (node.kind) {
      case Node::Kind::alternation:
        for (const Node& alternative : node.children)
          if (match(alternative, position, next)) return true;
        return false;
      case Node::Kind::sequence:
        return match_sequence(node, 0, position, next);
      case Node::Kind::negative_lookahead:
      case Node::Kind::positive_lookahead: {
        auto accept = [](size_t) { return true; };
        bool found = match(node.children[0], position, accept);
        return (found == (node.kind == Node::Kind::positive_lookahead)) && next(position);
      }
      case Node::Kind::characters:
        break;
    }
    LATHE_ASSERT(false);
    return false;
  }

  bool match_sequence(const Node& node, size_t index, size_t position, Continuation next) const {
    if (index == node.children.size()) return next(position);
    auto rest = [&](size_t end) { return match_sequence(node, index + 1, end, next); };
    return match(node.children[index], position, rest);
  }

  const std::vector<uint32_t>& text_;
};

class Parser {
 public:
  Parser(const std::string& pattern) : pattern_(pattern) {
    std::vector<size_t> offsets;
    decode_utf8(pattern, text_, offsets, "split pattern");
  }

  Node parse() {
    Node root = parse_alternation(false);
    if (position_ < text_.size()) fail("unbalanced ')'");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw_error("split pattern \"", pattern_, "\": ", what, " at character ", position_,
                " (supported: literals, classes, \\s \\S \\p{..} \\P{..}, groups, (?i:..), (?!..), | ? * + {m,n})");
  }
  bool at_end() const { return position_ >= text_.size(); }
  uint32_t peek() const { return text_[position_]; }

  Node parse_alternation(bool case_insensitive) {
    Node node;
    node.kind = Node::Kind::alternation;
    node.children.push_back(parse_sequence(case_insensitive));
    while (!at_end() && peek() == '|') {
      ++position_;
      node.children.push_back(parse_sequence(case_insensitive));
    }
    return node;
  }

  Node parse_sequence(bool case_insensitive) {
    Node node;
    node.kind = Node::Kind::sequence;
    while (!at_end() && peek() != '|' && peek() != ')') {
      Node atom = parse_atom(case_insensitive);
      parse_quantifier(atom);
      node.children.push_back(std::move(atom));
    }
    return node;
  }

  Node parse_atom(bool case_insensitive) {
    uint32_t c = peek();
    if (c == '(') {
      ++position_;
      Node node;
      bool inner_case_insensitive = case_insensitive;
      Node::Kind kind = Node::Kind::alternation;
      if (!at_end() && peek() == '?') {
        ++position_;
        std::string flags;
        while (!at_end() && peek() != ':' && peek() != ')' && peek() != '!' && peek() != '=')
          flags += static_cast<char>(text_[position_++]);
        if (at_end()) fail("unterminated group");
        uint32_t kind_char = text_[position_++];
        if (kind_char == '!' && flags.empty()) {
          kind = Node::Kind::negative_lookahead;
        } else if (kind_char == '=' && flags.empty()) {
          kind = Node::Kind::positive_lookahead;
        } else if (kind_char == ':' && (flags.empty() || flags == "i")) {
          inner_case_insensitive = case_insensitive || flags == "i";
        } else {
          --position_;
          fail("unsupported group (?" + flags + static_cast<char>(kind_char) + "...)");
        }
      }
      Node inner = parse_alternation(inner_case_insensitive);
      if (at_end() || peek() != ')') fail("missing ')'");
      ++position_;
      if (kind == Node::Kind::alternation) return inner;
      node.kind = kind;
      node.children.push_back(std::move(inner));
      return node;
    }
    Node node;
    node.kind = Node::Kind::characters;
    node.case_insensitive = case_insensitive;
    if (c == '[') {
      ++position_;
      if (!at_end() && peek() == '^') {
        node.negated = true;
        ++position_;
      }
      bool first = true;
      while (!at_end() && (peek() != ']' || first)) {
        first = false;
        Node::Item item = parse_class_item();
        if (item.kind == Node::Item::Kind::range && position_ + 1 < text_.size() && peek() == '-' &&
            text_[position_ + 1] != ']') {
          ++position_;
          Node::Item high = parse_class_item();
          if (high.kind != Node::Item::Kind::range || high.low < item.low) fail("bad range in class");
          item.high = high.low;
        }
        node.items.push_back(item);
      }
      if (at_end()) fail("missing ']'");
      ++position_;
      return node;
    }
    if (c == '.' || c == '^' || c == '$' || c == '*' || c == '+' || c == '?' || c == '{' || c == ')')
      fail(std::string("unsupported or misplaced '") + static_cast<char>(c) + "'");
    node.items.push_back(parse_class_item());
    return node;
  }

  // One character or escape, inside or outside a class.
  Node::Item parse_class_item() {
    Node::Item item;
    item.kind = Node::Item::Kind::range;
    uint32_t c = text_[position_++];
    if (c != '\\') {
      item.low = item.high = c;
      return item;
    }
    if (at_end()) fail("pattern ends with '\\'");
    uint32_t escape = text_[position_++];
    switch (escape) {
      case 'r':
        item.low = item.high = '\r';
        return item;
      case 'n':
        item.low = item.high = '\n';
        return item;
      case 't':
        item.low = item.high = '\t';
        return item;
      case 'f':
        item.low = item.high = '\f';
        return item;
      case 'v':
        item.low = item.high = '\v';
        return item;
      case 'x': {  // \xHH or \x{H...}
        bool braced = !at_end() && peek() == '{';
        if (braced) ++position_;
        uint32_t value = 0;
        int digits = 0;
        while (!at_end() && (braced ? peek() != '}' : digits < 2)) {
          uint32_t c = peek();
          int digit = (c >= '0' && c <= '9')   ? static_cast<int>(c - '0')
                      : (c >= 'a' && c <= 'f') ? static_cast<int>(c - 'a' + 10)
                      : (c >= 'A' && c <= 'F') ? static_cast<int>(c - 'A' + 10)
                                               : -1;
          if (digit < 0 || digits == 6) fail("bad \\x escape");
          value = value * 16 + static_cast<uint32_t>(digit);
          ++digits;
          ++position_;
        }
        if (digits == 0 || value > 0x10FFFF || (braced && at_end())) fail("bad \\x escape");
        if (braced) ++position_;
        item.low = item.high = value;
        return item;
      }
      case 's':
      case 'S':
        item.kind = Node::Item::Kind::white_space;
        item.negated = escape == 'S';
        return item;
      case 'p':
      case 'P': {
        if (at_end() || peek() != '{') fail("expected '{' after \\p");
        ++position_;
        std::string name;
        while (!at_end() && peek() != '}') name += static_cast<char>(text_[position_++]);
        if (at_end()) fail("missing '}' after \\p{");
        ++position_;
        bool known_major = name.size() >= 1 && std::string("LMNPSZC").find(name[0]) != std::string::npos;
        if (!known_major || name.size() > 2) fail("unknown property \\p{" + name + "}");
        item.kind = Node::Item::Kind::category;
        item.major = name[0];
        item.minor = name.size() == 2 ? name[1] : 0;
        item.negated = escape == 'P';
        return item;
      }
      default:
        if (escape < 0x80 && !((escape >= 'a' && escape <= 'z') || (escape >= 'A' && escape <= 'Z') ||
                               (escape >= '0' && escape <= '9'))) {
          item.low = item.high = escape;  // escaped punctuation stands for itself
          return item;
        }
        --position_;
        fail(std::string("unsupported escape '\\") + static_cast<char>(escape) + "'");
    }
  }

  void parse_quantifier(Node& atom) {
    if (at_end()) return;
    uint32_t c = peek();
    int min = 1, max = 1;
    if (c == '?') {
      min = 0;
    } else if (c == '*') {
      min = 0;
      max = INT_MAX;
    } else if (c == '+') {
      max = INT_MAX;
    } else if (c == '{') {
      size_t close = position_;
      while (close < text_.size() && text_[close] != '}') ++close;
      if (close == text_.size()) fail("missing '}' in quantifier");
      std::string body;
      for (size_t i = position_ + 1; i < close; ++i) body += static_cast<char>(text_[i]);
      size_t comma = body.find(',');
      auto number = [&](const std::string& digits) {
        if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos)
          fail("bad quantifier {" + body + "}");
        return std::stoi(digits);
      };
      min = number(body.substr(0, comma));
      max = comma == std::string::npos ? min : comma + 1 == body.size() ? INT_MAX : number(body.substr(comma + 1));
      if (max < min) fail("bad quantifier {" + body + "}");
      position_ = close;
    } else {
      return;
    }
    ++position_;
    if (!at_end() && (peek() == '?' || peek() == '+')) fail("lazy or possessive quantifiers are not supported");
    if (atom.min != 1 || atom.max != 1) fail("nested quantifier");
    if (atom.kind == Node::Kind::negative_lookahead || atom.kind == Node::Kind::positive_lookahead)
      fail("quantified lookahead");
    atom.min = min;
    atom.max = max;
  }

  const std::string& pattern_;
  std::vector<uint32_t> text_;
  size_t position_ = 0;
};

}  // namespace

SplitRegex::SplitRegex(const std::string& pattern)
    : pattern_(pattern), root_(std::make_unique<Node>(Parser(pattern).parse())) {}
SplitRegex::SplitRegex(SplitRegex&&) noexcept = default;
SplitRegex& SplitRegex::operator=(SplitRegex&&) noexcept = default;
SplitRegex::~SplitRegex() = default;

std::vector<std::pair<size_t, size_t>> SplitRegex::find_all(const std::vector<uint32_t>& text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  Matcher matcher(text);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = 0;
    auto record = [&](size_t position) {
      end = position;
      return true;
    };
    if (matcher.match(*root_, start, record) && end > start) {
      matches.emplace_back(start, end);
      start = end;
    } else {
      ++start;
    }
  }
  return matches;
}

}  // namespace lathe
