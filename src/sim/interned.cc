#include "sim/interned.h"

#include <mutex>
#include <unordered_set>

namespace colo {
namespace {

struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>()(text); }
};

struct Table {
  std::mutex mutex;
  // Nodes: a text's address never moves.
  std::unordered_set<std::string, TextHash, std::equal_to<>> texts;
};

Table& Texts() {
  static Table* table = new Table;  // never destroyed: names may be read until the process ends
  return *table;
}

const std::string* Find(std::string_view text) {
  if (text.empty()) return &Interned::EmptyText();
  Table& table = Texts();
  std::lock_guard lock(table.mutex);
  if (auto found = table.texts.find(text); found != table.texts.end()) return &*found;
  return &*table.texts.emplace(text).first;
}

}  // namespace

const std::string& Interned::EmptyText() {
  static const std::string* empty = new std::string;
  return *empty;
}

Interned::Interned(std::string_view text) : text_(Find(text)) {}

}  // namespace colo
