// YAML config files through yaml-cpp: structures, scalar resolution, anchors, aliases, merge keys,
// block scalars, and every error with its line and column.
#include "lathe/io/yaml.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "expect_error.h"
#include "lathe/core/error.h"
#include "test_seed.h"

namespace lathe {
namespace {

// The error message thrown for `text`, or "" when it parses.
std::string yaml_error(const std::string& text) {
  return error_message_of([&] { parse_yaml(text, "test.yaml"); });
}

std::string error_of_value(const std::string& text) {
  return error_message_of([&] { parse_yaml_value(text, "override"); });
}

TEST(Yaml, NestedBlockMappingsAndSequences) {
  Json root = parse_yaml(
      "# a config\n"
      "model:\n"
      "  d_model: 256   # width\n"
      "  name: tiny\n"
      "\n"
      "  rope:\n"
      "    theta: 10000.0\n"
      "layers:\n"
      "  - 1\n"
      "  - two\n"
      "  -\n"
      "    nested: true\n"
      "top: last\n");
  EXPECT_EQ(root.dump(0),
            R"({"model":{"d_model":256,"name":"tiny","rope":{"theta":10000}},"layers":[1,"two",{"nested":true}],)"
            R"("top":"last"})");
}

TEST(Yaml, SequenceItemsHoldingMappingsAndSameIndentSequences) {
  Json root = parse_yaml(
      "runs:\n"
      "- name: a\n"
      "  lr: 0.1\n"
      "- name: b\n"
      "  tags:\n"
      "  - x\n"
      "  - - nested\n"
      "    - pair\n"
      "after: 1\n");
  EXPECT_EQ(root.dump(0), R"({"runs":[{"name":"a","lr":0.1},{"name":"b","tags":["x",["nested","pair"]]}],"after":1})");
}

TEST(Yaml, FlowCollections) {
  Json root = parse_yaml("a: [1, 2.5, x, 'q, r', [], {}]\nb: {k: v, n: -3, e: , list: [true]}  # trailing\nc: [a,]\n");
  EXPECT_EQ(root.dump(0), R"({"a":[1,2.5,"x","q, r",[],{}],"b":{"k":"v","n":-3,"e":null,"list":[true]},"c":["a"]})");
}

TEST(Yaml, PlainScalarsFollowTheCoreSchema) {
  Json root = parse_yaml(
      "int: 42\nneg: -7\nplus: +3\nexp: 1e-3\nlead: .5\nfloat: -2.0\nbig: 1.5E+3\n"
      "t: true\nf: False\nn: null\ntilde: ~\nempty:\nyes: yes\nver: 1.2.3\nurl: http://x.org/a#b\n"
      "word: don't stop\ninf: -.inf\nnan: .nan\nhex: 0x10\ncolon: a:b\n");
  EXPECT_EQ(root.get("int").as_number(), 42);
  EXPECT_EQ(root.get("neg").as_number(), -7);
  EXPECT_EQ(root.get("plus").as_number(), 3);
  EXPECT_EQ(root.get("exp").as_number(), 1e-3);
  EXPECT_EQ(root.get("lead").as_number(), 0.5);
  EXPECT_EQ(root.get("float").as_number(), -2.0);
  EXPECT_EQ(root.get("big").as_number(), 1500.0);
  EXPECT_TRUE(root.get("t").as_bool());
  EXPECT_FALSE(root.get("f").as_bool());
  EXPECT_TRUE(root.get("n").is_null());
  EXPECT_TRUE(root.get("tilde").is_null());
  EXPECT_TRUE(root.get("empty").is_null());
  EXPECT_EQ(root.get("yes").as_string(), "yes");  // YAML 1.2: not a boolean
  EXPECT_EQ(root.get("ver").as_string(), "1.2.3");
  EXPECT_EQ(root.get("url").as_string(), "http://x.org/a#b");  // '#' without a blank before it is text
  EXPECT_EQ(root.get("word").as_string(), "don't stop");
  EXPECT_EQ(root.get("inf").as_number(), -INFINITY);
  EXPECT_TRUE(std::isnan(root.get("nan").as_number()));
  EXPECT_EQ(root.get("hex").as_string(), "0x10");
  EXPECT_EQ(root.get("colon").as_string(), "a:b");
}

TEST(Yaml, QuotedScalarsStayStringsAndUnescape) {
  Json root = parse_yaml(
      "a: \"123\"\n"
      "b: 'it''s # not a comment'\n"
      "c: \"tab\\there\\n\\\"q\\\" \\\\ \\x41\\u00e9\\U0001F600\"\n"
      "'quoted key': \"\"\n"
      "\"k: v\": 1\n");
  EXPECT_EQ(root.get("a").as_string(), "123");
  EXPECT_EQ(root.get("b").as_string(), "it's # not a comment");
  EXPECT_EQ(root.get("c").as_string(), "tab\there\n\"q\" \\ A\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(root.get("quoted key").as_string(), "");
  EXPECT_EQ(root.get("k: v").as_number(), 1);
}

TEST(Yaml, DocumentsWithOnlyCommentsAreNullAndOneLeadingMarkerIsAllowed) {
  EXPECT_TRUE(parse_yaml("").is_null());
  EXPECT_TRUE(parse_yaml("# nothing\n\n   # here\n").is_null());
  EXPECT_EQ(parse_yaml("---\na: 1\r\n").dump(0), R"({"a":1})");
  EXPECT_EQ(parse_yaml("\xEF\xBB\xBF"
                       "a: 1\n")
                .dump(0),
            R"({"a":1})");
  EXPECT_EQ(parse_yaml("  indented: 1\n  root: 2\n").dump(0), R"({"indented":1,"root":2})");
  EXPECT_EQ(parse_yaml("just a scalar\n").as_string(), "just a scalar");
}

TEST(Yaml, RecordsWhereEachKeyWasWritten) {
  YamlKeyPositions positions;
  parse_yaml("model:\n  d_model: 1\nlist:\n  - {k: 2}\n", "x", &positions);
  EXPECT_EQ(positions.at("model").line, 1);
  EXPECT_EQ(positions.at("model.d_model").line, 2);
  EXPECT_EQ(positions.at("model.d_model").column, 3);
  EXPECT_EQ(positions.at("list.0.k").line, 4);
  EXPECT_EQ(positions.at("list.0.k").column, 6);
}

TEST(Yaml, StructuralErrorsNameLineAndColumn) {
  EXPECT_EQ(yaml_error("a:\n\tb: 1\n"), "test.yaml:2:1: tab in indentation (YAML indents with spaces)");
  EXPECT_EQ(yaml_error("a:\n    b: 1\n  c: 2\n"),
            "test.yaml:3:3: bad indentation or text after a value: this line does not continue the mapping above");
  EXPECT_EQ(yaml_error("a: 1\n  b: 2\n"),
            "test.yaml:2:4: unexpected ':' (quote values that contain ': ', or check the indentation)");
  EXPECT_EQ(yaml_error("a: 1\nb: 2\na: 3\n"), "test.yaml:3:1: duplicate key 'a' (first at line 1)");
  EXPECT_EQ(yaml_error("m: {x: 1, x: 2}\n"), "test.yaml:1:11: duplicate key 'x' (first at line 1)");
  EXPECT_EQ(yaml_error("a: 1\n- b\n"),
            "test.yaml:2:1: bad indentation or text after a value: this line does not continue the mapping above");
  EXPECT_EQ(yaml_error("- a\nb: 1\n"),
            "test.yaml:2:1: this line does not continue the document above (check its indentation)");
  EXPECT_EQ(yaml_error("a: b: c\n"),
            "test.yaml:1:5: unexpected ':' (quote values that contain ': ', or check the indentation)");
  EXPECT_EQ(yaml_error("a: - b\n"),
            "test.yaml:1:4: a block sequence cannot start on the same line as its key; start it on the next line");
  EXPECT_EQ(yaml_error("a: 'x' y\n"),
            "test.yaml:1:8: bad indentation or text after a value: this line does not continue the mapping above");
  EXPECT_EQ(yaml_error("? [a, b]\n: 1\n"), "test.yaml:1:3: a mapping key must be a plain value, not a list or mapping");
  EXPECT_EQ(yaml_error(": 1\n"), "test.yaml:1:1: missing key before ':'");
}

TEST(Yaml, ScalarAndFlowErrorsNameLineAndColumn) {
  EXPECT_EQ(yaml_error("a: 1\nb: \"open\n"), "test.yaml:2:4: unterminated double-quoted string");
  EXPECT_EQ(yaml_error("b: 'open\n"), "test.yaml:1:4: unterminated single-quoted string");
  EXPECT_EQ(yaml_error("b: \"\\q\"\n"), "test.yaml:1:7: unknown escape character: q");
  EXPECT_EQ(yaml_error("b: [1, 2\n"), "test.yaml:1:4: unterminated '[' (no matching ']')");
  EXPECT_EQ(yaml_error("# [ not this\nb: {k: '[', l: [1, 2],\n  m: 1\n"),
            "test.yaml:2:4: unterminated '{' (no matching '}')");
  EXPECT_EQ(yaml_error("b: [1, 2] ]\n"), "test.yaml:1:11: unexpected ']' or '}' (nothing open to close)");
  EXPECT_EQ(yaml_error("b: @x\n"), "test.yaml:1:4: a plain value cannot start with '@' or '`'; quote it");
  EXPECT_EQ(yaml_error("b: *missing\n"),
            "test.yaml:1:4: alias to an anchor not defined before it (&name must come first)");
}

TEST(Yaml, TagsOfTheCoreSchemaAreHonouredOthersRefused) {
  Json root = parse_yaml("a: !!str 1\nb: !!int 3\nc: !!float 2.5\nd: !!bool true\ne: !!null ~\nf: !!str\n");
  EXPECT_EQ(root.dump(0), R"({"a":"1","b":3,"c":2.5,"d":true,"e":null,"f":""})");
  EXPECT_EQ(yaml_error("a: !!int x\n"), "test.yaml:1:4: 'x' is not a valid !!int");
  EXPECT_EQ(yaml_error("a: !custom x\n"),
            "test.yaml:1:4: unsupported tag '!custom' (configs use plain values; remove the tag)");
}

TEST(Yaml, OneDocumentPerFile) {
  // yaml-cpp 0.7's LoadAll loops forever on a stray ','; this must be an error, not memory exhaustion.
  EXPECT_EQ(yaml_error(",\n- e\n"),
            "test.yaml:1:1: unexpected ',' outside a flow collection ([...] or {...}); quote the value");
  EXPECT_EQ(yaml_error("a: 1\n---\nb: 2\n"), "test.yaml:2:1: a second YAML document ('---'): a config file holds one");
  EXPECT_EQ(parse_yaml("%YAML 1.2\n---\na: 1\n...\n").dump(0), R"({"a":1})");
}

TEST(Yaml, AnchorsAndAliasesRepeatValues) {
  YamlKeyPositions positions;
  Json root = parse_yaml(
      "sizes: &sizes [64, 128]\n"
      "shape: &shape\n"
      "  d_model: 256\n"
      "  name: &name tiny\n"
      "copy: *shape\n"
      "again: *sizes\n"
      "label: *name\n",
      "test.yaml", &positions);
  EXPECT_EQ(root.dump(0),
            R"({"sizes":[64,128],"shape":{"d_model":256,"name":"tiny"},"copy":{"d_model":256,"name":"tiny"},)"
            R"("again":[64,128],"label":"tiny"})");
  EXPECT_EQ(positions.at("copy.d_model").line, 3);  // where the copied mapping wrote the key
}

TEST(Yaml, MergeKeysFillWhatTheMappingDoesNotSet) {
  YamlKeyPositions positions;
  Json root = parse_yaml(
      "base: &base {lr: 0.1, steps: 10, seed: 1}\n"
      "extra: &extra {steps: 99, warmup: 5}\n"
      "one:\n"
      "  steps: 20\n"
      "  <<: *base\n"
      "many:\n"
      "  <<: [*extra, *base]\n"
      "  seed: 7\n"
      "quoted:\n"
      "  \"<<\": literal\n",
      "test.yaml", &positions);
  // The mapping's own keys win wherever they stand; earlier merged mappings win over later ones.
  EXPECT_EQ(root.get("one").dump(0), R"({"steps":20,"lr":0.1,"seed":1})");
  EXPECT_EQ(root.get("many").dump(0), R"({"seed":7,"steps":99,"warmup":5,"lr":0.1})");
  EXPECT_EQ(root.get("quoted").dump(0), R"({"<<":"literal"})");  // a quoted "<<" is an ordinary key
  EXPECT_EQ(positions.at("one.steps").line, 4);
  EXPECT_EQ(positions.at("one.lr").line, 1);
  EXPECT_EQ(yaml_error("a:\n  <<: 3\n"),
            "test.yaml:2:7: a merge key '<<' takes a mapping or a list of mappings (e.g. <<: *base)");
}

TEST(Yaml, BlockScalarsKeepOrFoldTheirLines) {
  Json root = parse_yaml(
      "literal: |\n"
      "  line one\n"
      "    indented\n"
      "\n"
      "  last\n"
      "folded: >\n"
      "  folded\n"
      "  words\n"
      "\n"
      "  paragraph\n"
      "strip: |-\n"
      "  no newline\n"
      "plain_after: 1\n");
  EXPECT_EQ(root.get("literal").as_string(), "line one\n  indented\n\nlast\n");
  EXPECT_EQ(root.get("folded").as_string(), "folded words\nparagraph\n");
  EXPECT_EQ(root.get("strip").as_string(), "no newline");
  EXPECT_EQ(root.get("plain_after").as_number(), 1);
  EXPECT_EQ(parse_yaml("n: |\n  42\n").get("n").as_string(), "42\n");  // never a number
}

TEST(Yaml, MultiLineFlowCollectionsAndQuotedStrings) {
  Json root = parse_yaml("list: [1,\n  2, 3]\nmap: {a: 1,\n  b: 2}\ntext: \"one\n  two\"\n");
  EXPECT_EQ(root.dump(0), R"({"list":[1,2,3],"map":{"a":1,"b":2},"text":"one two"})");
}

TEST(Yaml, AliasesCannotExplodeMemory) {
  std::string text = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n";
  for (char name = 'b'; name <= 'h'; ++name) {
    text += str_cat(name, ": &", name, " [");
    for (int i = 0; i < 10; ++i) text += str_cat(i ? ", *" : "*", static_cast<char>(name - 1));
    text += "]\n";
  }
  EXPECT_NE(yaml_error(text).find("the document expands to more than 100000 values"), std::string::npos);
}

TEST(Yaml, DeepNestingIsAnErrorNotACrash) {
  std::string text = "v: " + std::string(200, '[') + std::string(200, ']') + "\n";
  EXPECT_NE(yaml_error(text).find("nesting deeper than"), std::string::npos);
}

// User files never crash the parser: random edits of a real config parse or throw lathe::Error.
TEST(Yaml, MutatedInputGivesValuesOrErrorsNeverCrashes) {
  const std::string original =
      "model:\n  d_model: 256   # width\n  list: [1, 'two', {k: \"v\\n\"}]\nseq:\n- x\n- - y: 1\n    z: [2]\nrun: "
      "\"a\"\n";
  const std::string alphabet = " \t\n:-#'\"[]{},&*!|>?%\\xu0e.";
  std::mt19937_64 random(test_seed());
  int parsed = 0, rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text = original;
    for (int edit = 0; edit < 4; ++edit) {
      size_t at = random() % (text.size() + 1);
      char c = alphabet[random() % alphabet.size()];
      switch (random() % 3) {
        case 0:
          text.insert(at, 1, c);
          break;
        case 1:
          if (at < text.size()) text.erase(at, 1);
          break;
        default:
          if (at < text.size()) text[at] = c;
      }
    }
    try {
      parse_yaml(text, "fuzz");
      ++parsed;
    } catch (const Error&) {
      ++rejected;
    }
  }
  parse_yaml(original, "original");
  EXPECT_GT(parsed, 0) << "seed " << test_seed();  // the edits exercise both outcomes
  EXPECT_GT(rejected, 0) << "seed " << test_seed();
}

TEST(Yaml, SingleValuesForOverrides) {
  EXPECT_EQ(parse_yaml_value("1e-3", "override").as_number(), 1e-3);
  EXPECT_EQ(parse_yaml_value("/tmp/run dir", "override").as_string(), "/tmp/run dir");
  EXPECT_EQ(parse_yaml_value("''", "override").as_string(), "");
  EXPECT_EQ(parse_yaml_value("[1, 2]", "override").dump(0), "[1,2]");
  EXPECT_EQ(parse_yaml_value("x # comment", "override").as_string(), "x");
  EXPECT_EQ(parse_yaml_value("a:b", "override").as_string(), "a:b");
  EXPECT_EQ(error_of_value("a: b"),
            "override: unexpected ':' (quote values that contain ': ', or check the indentation) (at character 2)");
  EXPECT_EQ(error_of_value("- a"),
            "override: a block sequence cannot start on the same line as its key; start it on the next line "
            "(at character 1)");
  EXPECT_EQ(error_of_value("1\n2"), "override: expected a single-line value");
  try {
    parse_yaml_value("'open", "override 'x='open'");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "override 'x='open': unterminated quoted string (at character 6)");
  }
}

TEST(Yaml, FilesReportTheirPathInErrors) {
  auto path = std::filesystem::temp_directory_path() / ("lathe_yaml_test_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << "a: 1\na: 2\n";
  try {
    load_yaml_file(path.string());
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()), path.string() + ":2:1: duplicate key 'a' (first at line 1)");
  }
  std::filesystem::remove(path);
  EXPECT_THROW(load_yaml_file(path.string()), Error);
  EXPECT_THROW(load_yaml_file(std::filesystem::temp_directory_path().string()), Error);
}

}  // namespace
}  // namespace lathe
