#pragma once
/// \file json_reader.hpp
/// Strict JSON reading for files users write (ramulator-style required / optional
/// fields). Every field a component reads is declared by the call that reads it; after
/// reading, `finish()` rejects keys nobody asked for, with a "did you mean". Errors are
/// `ConfigError`s that name the file, the JSON pointer and what was expected.
///
/// Keys named "source", "sources" and "note" are documentation and allowed in any object.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/units.hpp"

namespace perfcast {

/// A user input error: file, JSON pointer, message. The CLI maps it to exit code 2.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string file, std::string pointer, const std::string& message);
  [[nodiscard]] const std::string& file() const { return file_; }
  [[nodiscard]] const std::string& pointer() const { return pointer_; }
  [[nodiscard]] const std::string& message() const { return message_; }  ///< without file and pointer

 private:
  std::string file_;
  std::string pointer_;
  std::string message_;
};

/// A parsed JSON document with the name of the file it came from.
struct JsonDocument {
  nlohmann::json root;
  std::string file;  ///< path as the user gave it (or "--set", "<generated>")
};

/// The one JSON parser of every input: parses `text` from `file`, refusing nesting deeper
/// than limits::kMaxJsonDepth (before parsing), syntax errors (line and column) and
/// numbers beyond a double ("1e400"), each as a ConfigError naming the file. `expected`
/// (may be empty) says what the document should have been.
[[nodiscard]] nlohmann::json parse_json_text(std::string_view text, const std::string& file,
                                             std::string_view expected = {});

/// Reads (core/input_file.hpp bounds) and parses a JSON file with parse_json_text.
[[nodiscard]] JsonDocument load_json_file(const std::filesystem::path& path);

/// Reads a JSON-lines file (measurements, validation and PyTorch results): calls `each`
/// with every non-blank line parsed, its `file` set to "PATH line N" so errors name the
/// line. Throws ConfigError when the file cannot be opened, or for a line that is not
/// valid JSON ("invalid JSON (expected <expected>)").
void for_each_json_line(const std::filesystem::path& path, std::string_view expected,
                        const std::function<void(const JsonDocument&)>& each);

/// Edit distance used for "did you mean" suggestions.
[[nodiscard]] std::size_t edit_distance(std::string_view a, std::string_view b);
/// Closest candidate within a distance of max(2, size/3), or empty.
[[nodiscard]] std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

class JsonObject;
class JsonArray;

/// A located JSON value: knows its file and pointer for error messages.
class JsonValue {
 public:
  JsonValue(const nlohmann::json* j, std::shared_ptr<const std::string> file, std::string pointer)
      : j_(j), file_(std::move(file)), pointer_(std::move(pointer)) {}

  [[nodiscard]] std::string as_string() const;
  [[nodiscard]] double as_number() const;  ///< any finite JSON number
  /// Integer in [lo, hi]; a JSON number with a fraction is an error.
  [[nodiscard]] std::int64_t as_integer(std::int64_t lo = std::numeric_limits<std::int64_t>::min(),
                                        std::int64_t hi = std::numeric_limits<std::int64_t>::max()) const;
  /// Number in [lo, hi].
  [[nodiscard]] double as_number_in(double lo, double hi) const;
  [[nodiscard]] bool as_bool() const;
  /// A quantity string with a unit, e.g. "900GB/s", converted to SI.
  [[nodiscard]] double as_quantity(Dimension d) const;
  /// A string that must be one of `choices`.
  [[nodiscard]] std::string as_enum(const std::vector<std::string>& choices) const;
  [[nodiscard]] JsonObject as_object() const;
  [[nodiscard]] JsonArray as_array() const;

  [[nodiscard]] bool is_string() const { return j_->is_string(); }
  [[nodiscard]] bool is_object() const { return j_->is_object(); }
  [[nodiscard]] bool is_array() const { return j_->is_array(); }
  [[nodiscard]] bool is_number() const { return j_->is_number(); }
  [[nodiscard]] const nlohmann::json& raw() const { return *j_; }
  [[nodiscard]] const std::string& pointer() const { return pointer_; }
  [[nodiscard]] const std::string& file() const { return *file_; }
  [[noreturn]] void fail(const std::string& message) const;

 private:
  const nlohmann::json* j_;
  std::shared_ptr<const std::string> file_;
  std::string pointer_;
};

/// A JSON object whose keys are read strictly.
class JsonObject {
 public:
  JsonObject(const nlohmann::json* j, std::shared_ptr<const std::string> file, std::string pointer);
  /// The root object of a document.
  explicit JsonObject(const JsonDocument& doc);

  /// Required field; missing is an error naming the path.
  [[nodiscard]] JsonValue at(std::string_view key) const;
  /// Optional field; declares the key as known.
  [[nodiscard]] std::optional<JsonValue> find(std::string_view key) const;
  [[nodiscard]] bool has(std::string_view key) const;
  /// All keys but documentation keys, in file order, declared known (for maps keyed by name).
  [[nodiscard]] std::vector<std::string> keys() const;

  // Shorthands for required fields.
  [[nodiscard]] std::string string(std::string_view key) const { return at(key).as_string(); }
  [[nodiscard]] double quantity(std::string_view key, Dimension d) const { return at(key).as_quantity(d); }
  [[nodiscard]] std::int64_t integer(std::string_view key, std::int64_t lo, std::int64_t hi) const {
    return at(key).as_integer(lo, hi);
  }
  [[nodiscard]] JsonObject object(std::string_view key) const;
  [[nodiscard]] JsonArray array(std::string_view key) const;

  // Shorthands for fields with a stated default.
  [[nodiscard]] std::string string_or(std::string_view key, std::string def) const;
  [[nodiscard]] double quantity_or(std::string_view key, Dimension d, double def) const;
  [[nodiscard]] std::int64_t integer_or(std::string_view key, std::int64_t lo, std::int64_t hi,
                                        std::int64_t def) const;
  [[nodiscard]] double number_or(std::string_view key, double lo, double hi, double def) const;
  [[nodiscard]] bool bool_or(std::string_view key, bool def) const;
  [[nodiscard]] std::string enum_or(std::string_view key, const std::vector<std::string>& choices,
                                    std::string def) const;

  /// Checks the schema name and that the major version is supported ("name", "1.x").
  void require_schema(std::string_view name, int major) const;

  /// Rejects every key that no call above declared, suggesting the closest known key.
  void finish() const;

  [[nodiscard]] std::string child_pointer(std::string_view key) const;
  [[nodiscard]] const std::string& pointer() const { return pointer_; }
  [[nodiscard]] const std::string& file() const { return *file_; }
  [[noreturn]] void fail(std::string_view key, const std::string& message) const;

 private:
  const nlohmann::json* j_;
  std::shared_ptr<const std::string> file_;
  std::string pointer_;
  mutable std::set<std::string, std::less<>> known_;
};

class JsonArray {
 public:
  JsonArray(const nlohmann::json* j, std::shared_ptr<const std::string> file, std::string pointer)
      : j_(j), file_(std::move(file)), pointer_(std::move(pointer)) {}
  [[nodiscard]] std::size_t size() const { return j_->size(); }
  [[nodiscard]] JsonValue operator[](std::size_t i) const;
  /// Fails unless lo <= size() <= hi.
  void require_size(std::size_t lo, std::size_t hi) const;
  [[nodiscard]] const std::string& pointer() const { return pointer_; }
  [[noreturn]] void fail(const std::string& message) const;

 private:
  const nlohmann::json* j_;
  std::shared_ptr<const std::string> file_;
  std::string pointer_;
};

/// Applies a what-if override `path=value` to a document. `path` is dotted with
/// optional [i] indices ("tables[0].rows") or a JSON pointer ("/tables/0/rows").
/// The parent must exist; the value is parsed as JSON when it is valid JSON, else taken
/// as a string. Errors name "--set" and the path.
void apply_override(JsonDocument& doc, std::string_view path, std::string_view value);

/// Converts "a.b[2].c" to "/a/b/2/c" (a pointer passes through unchanged).
[[nodiscard]] std::string to_json_pointer(std::string_view path);

}  // namespace perfcast
