// `lockstep ops [TYPE]`: what SchemaRegistry holds, as text. The schemas are the only source, so the
// catalogue cannot disagree with what operators accept.
#include "ops_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <vector>

#include "lockstep/core/schema.h"

namespace lockstep {
namespace {

// Up to the first ". " before a capital letter: "e.g. of" does not end a sentence.
std::string FirstSentence(const std::string& doc) {
  for (size_t end = doc.find(". "); end != std::string::npos; end = doc.find(". ", end + 1))
    if (end + 2 < doc.size() && std::isupper(static_cast<unsigned char>(doc[end + 2])))
      return doc.substr(0, end + 1);
  return doc;
}

// Rows of cells with each column as wide as its widest cell; the last column is not padded.
void PrintTable(const std::vector<std::vector<std::string>>& rows, const std::string& indent) {
  std::vector<size_t> widths;
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) {
      if (widths.size() <= i) widths.push_back(0);
      widths[i] = std::max(widths[i], row[i].size());
    }
  for (const auto& row : rows) {
    std::string line = indent;
    for (size_t i = 0; i < row.size(); ++i)
      line += i + 1 < row.size() ? fmt::format("{:<{}}  ", row[i], widths[i]) : row[i];
    fmt::print("{}\n", line);
  }
}

void PrintBlobs(const char* title, const std::vector<BlobSpec>& blobs) {
  if (blobs.empty()) return;
  fmt::print("{}:\n", title);
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < blobs.size(); ++i)
    rows.push_back(
        {std::to_string(i), blobs[i].name, (blobs[i].optional ? "optional: " : "") + blobs[i].doc});
  PrintTable(rows, "  ");
}

void PrintSchema(const OpSchema& schema) {
  fmt::print("{}: {}\n", schema.type(), schema.doc());
  PrintBlobs("Inputs", schema.inputs());
  PrintBlobs("Outputs", schema.outputs());
  const std::vector<const ArgSpec*> args = schema.args();
  if (args.empty()) {
    fmt::print("Arguments: none\n");
    return;
  }
  fmt::print("Arguments:\n");
  std::vector<std::vector<std::string>> rows{{"name", "type", "default", "accepts", "doc"}};
  for (const ArgSpec* arg : args) {
    const std::string default_text = DefaultText(*arg);
    rows.push_back({arg->name, ArgTypeName(arg->type), default_text.empty() ? "-" : default_text,
                    RangeText(*arg), arg->doc});
  }
  PrintTable(rows, "  ");
}

}  // namespace

void AddOpsFlags(CLI::App* app, OpsFlags* flags) {
  app->add_option("type", flags->type, "An operator type (e.g. Conv); without one, every type is listed");
}

int RunOps(const OpsFlags& flags) {
  if (!flags.type.empty()) {
    PrintSchema(SchemaRegistry::Of(MakeOperatorDef(flags.type, {}, {})));
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const std::string& type : SchemaRegistry::Types())
    rows.push_back({type, FirstSentence(SchemaRegistry::Find(type)->doc())});
  PrintTable(rows, "");
  return 0;
}

}  // namespace lockstep
