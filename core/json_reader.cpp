#include "core/json_reader.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include <fmt/format.h>

#include "core/file_kind.hpp"
#include "core/input_file.hpp"
#include "core/limits.hpp"

namespace perfcast {
namespace {

const std::set<std::string, std::less<>> kDocumentationKeys = {"source", "sources", "note"};

std::string escape_pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::string type_name(const nlohmann::json& j) { return j.type_name(); }

}  // namespace

ConfigError::ConfigError(std::string file, std::string pointer, const std::string& message)
    : std::runtime_error(fmt::format("{}: {}: {}", file, pointer.empty() ? "/" : pointer, message)),
      file_(std::move(file)),
      pointer_(std::move(pointer)),
      message_(message) {}

namespace {

/// Finds where arrays and objects nest deeper than limits::kMaxJsonDepth, by a scan that
/// skips strings; returns the offset of the opening bracket that goes too deep.
std::optional<std::size_t> too_deep_at(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limits::kMaxJsonDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::nullopt;
}

/// The literal nlohmann quotes in "number overflow parsing '1e400'", or empty.
std::string quoted_token(const std::string& what) {
  const auto a = what.find('\'');
  const auto b = a == std::string::npos ? a : what.find('\'', a + 1);
  return b == std::string::npos ? std::string() : what.substr(a + 1, b - a - 1);
}

/// A key that appears twice in one object: nlohmann would keep the later value silently.
struct DuplicateKey {
  std::string pointer;
};

/// A SAX handler that builds the document (nlohmann's own DOM builder does the building)
/// and refuses a key that appears twice in one object, tracking the JSON pointer of what it
/// reads (keys of objects, indices of arrays). About 15% slower than a plain parse on a
/// 35 MB Kineto trace; nlohmann's callback parser, the other way to see keys, is 20x slower.
class DuplicateCheckingDom {
 public:
  using json = nlohmann::json;
  explicit DuplicateCheckingDom(json& root) : dom_(root, true) {}
  bool null() { return element(), dom_.null(); }
  bool boolean(bool v) { return element(), dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return element(), dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return element(), dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return element(), dom_.number_float(v, s); }
  bool string(json::string_t& v) { return element(), dom_.string(v); }
  bool binary(json::binary_t& v) { return element(), dom_.binary(v); }
  bool start_object(std::size_t n) {
    element();
    frames_.emplace_back();
    return dom_.start_object(n);
  }
  bool key(json::string_t& k) {
    Frame& f = frames_.back();
    f.key = k;
    if (!f.insert(k)) throw DuplicateKey{pointer()};
    return dom_.key(k);
  }
  bool end_object() {
    frames_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    element();
    frames_.emplace_back();
    frames_.back().array = true;
    return dom_.start_array(n);
  }
  bool end_array() {
    frames_.pop_back();
    return dom_.end_array();
  }
  /// Templated as nlohmann's own handler is: it rethrows `e` as its own type (parse_error,
  /// out_of_range), which a base-class reference would slice.
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& e) {
    return dom_.parse_error(position, token, e);
  }

 private:
  struct Frame {
    bool array = false;
    long long index = -1;  ///< arrays: the element being read
    std::string key;       ///< objects: the key being read
    std::vector<std::string> keys;         ///< objects: the keys so far (a scan: most objects are small)
    std::unordered_set<std::string> many;  ///< from 32 keys on
    bool insert(const std::string& k) {
      if (!many.empty()) return many.insert(k).second;
      if (std::find(keys.begin(), keys.end(), k) != keys.end()) return false;
      keys.push_back(k);
      if (keys.size() > 32) many.insert(keys.begin(), keys.end());
      return true;
    }
  };
  void element() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }
  std::string pointer() const {
    std::string p;
    for (const Frame& f : frames_) p += "/" + (f.array ? std::to_string(f.index) : escape_pointer_token(f.key));
    return p;
  }
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::vector<Frame> frames_;
};

}  // namespace

nlohmann::json parse_json_text(std::string_view text, const std::string& file, std::string_view expected) {
  const std::string what = expected.empty() ? std::string() : fmt::format(" (expected {})", expected);
  if (const auto deep = too_deep_at(text)) {
    const TextPosition p = position_of(text, *deep);
    throw ConfigError(file, "",
                      fmt::format("arrays and objects nest deeper than {} levels at line {}, column {}{}",
                                  limits::kMaxJsonDepth, p.line, p.column, what));
  }
  try {
    nlohmann::json root;
    DuplicateCheckingDom dom(root);
    nlohmann::json::sax_parse(text, &dom);
    return root;
  } catch (const DuplicateKey& d) {
    throw ConfigError(file, d.pointer,
                      fmt::format("the key appears twice in one object (a reader would silently keep one of them){}", what));
  } catch (const nlohmann::json::parse_error& e) {
    const TextPosition p = position_of(text, e.byte == 0 ? 0 : e.byte - 1);
    const std::string kind = describe_text_kind(text);
    throw ConfigError(file, "", fmt::format("invalid JSON at line {}, column {}{}{}", p.line, p.column, what,
                                            kind.empty() ? "" : "; " + kind));
  } catch (const nlohmann::json::exception& e) {
    // out_of_range 406: a number beyond the range of a double ("1e400").
    const std::string tok = quoted_token(e.what());
    throw ConfigError(file, "",
                      fmt::format("the number {} is out of the range of a double (largest 1.8e308){}",
                                  tok.empty() ? std::string("in the file") : tok, what));
  }
}

void for_each_json_line(const std::filesystem::path& path, std::string_view expected,
                        const std::function<void(const JsonDocument&)>& each) {
  const std::string text = read_input_file(path);
  std::size_t begin = 0;
  int lineno = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + begin, end - begin);
    begin = end + 1;
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    JsonDocument doc;
    doc.file = fmt::format("{} line {}", path.string(), lineno);
    doc.root = parse_json_text(line, doc.file, expected);
    each(doc);
  }
}

JsonDocument load_json_file(const std::filesystem::path& path) {
  JsonDocument doc;
  doc.file = path.string();
  doc.root = parse_json_text(read_input_file(path), doc.file);
  return doc;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_d) { best_d = d; best = c; }
  }
  return best;
}

// ---- JsonValue ---------------------------------------------------------------------

void JsonValue::fail(const std::string& message) const { throw ConfigError(*file_, pointer_, message); }

std::string JsonValue::as_string() const {
  if (!j_->is_string()) fail(fmt::format("expected a string, got {}", type_name(*j_)));
  return j_->get<std::string>();
}

double JsonValue::as_number() const {
  if (!j_->is_number()) fail(fmt::format("expected a number, got {}", type_name(*j_)));
  const double v = j_->get<double>();
  if (!std::isfinite(v)) fail("expected a finite number");
  return v;
}

std::int64_t JsonValue::as_integer(std::int64_t lo, std::int64_t hi) const {
  if (!j_->is_number()) fail(fmt::format("expected an integer, got {}", type_name(*j_)));
  std::int64_t v = 0;
  if (j_->is_number_integer()) {
    if (j_->is_number_unsigned() && j_->get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
      fail(fmt::format("expected an integer in [{}, {}], got {}", lo, hi, j_->dump()));
    v = j_->get<std::int64_t>();
  } else {
    const double d = j_->get<double>();
    if (std::floor(d) != d || std::fabs(d) > 9.0e18) fail(fmt::format("expected an integer, got {}", j_->dump()));
    v = static_cast<std::int64_t>(d);
  }
  if (v < lo || v > hi) fail(fmt::format("expected an integer in [{}, {}], got {}", lo, hi, v));
  return v;
}

double JsonValue::as_number_in(double lo, double hi) const {
  const double v = as_number();
  if (v < lo || v > hi) fail(fmt::format("expected a number in [{}, {}], got {}", lo, hi, v));
  return v;
}

bool JsonValue::as_bool() const {
  if (!j_->is_boolean()) fail(fmt::format("expected true or false, got {}", type_name(*j_)));
  return j_->get<bool>();
}

double JsonValue::as_quantity(Dimension d) const {
  if (!j_->is_string()) {
    fail(fmt::format("expected {} as a string with a unit such as {}, got {}", dimension_name(d),
                     dimension_example(d), j_->dump()));
  }
  try {
    return parse_quantity(j_->get<std::string>(), d);
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
}

std::string JsonValue::as_enum(const std::vector<std::string>& choices) const {
  const std::string s = as_string();
  if (std::find(choices.begin(), choices.end(), s) != choices.end()) return s;
  std::string msg = fmt::format("unknown value \"{}\"; expected one of: {}", s, fmt::join(choices, ", "));
  const std::string guess = closest_match(s, choices);
  if (!guess.empty()) msg += fmt::format(" (did you mean \"{}\"?)", guess);
  fail(msg);
}

JsonObject JsonValue::as_object() const {
  if (!j_->is_object()) fail(fmt::format("expected an object, got {}", type_name(*j_)));
  return JsonObject(j_, file_, pointer_);
}

JsonArray JsonValue::as_array() const {
  if (!j_->is_array()) fail(fmt::format("expected an array, got {}", type_name(*j_)));
  return JsonArray(j_, file_, pointer_);
}

namespace {

/// "missing required key", naming the key of `object` closest to `key` among those nothing
/// has read yet (`known`): a misspelt key is the usual cause.
std::string missing_key_message(const nlohmann::json& object, const std::set<std::string, std::less<>>& known,
                                std::string_view key) {
  std::vector<std::string> unread;
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (!known.count(it.key()) && !kDocumentationKeys.count(it.key())) unread.push_back(it.key());
  }
  const std::string near = closest_match(key, unread);
  if (near.empty()) return "missing required key";
  return fmt::format("missing required key (the file has \"{}\" here: did you mean \"{}\"?)", near, key);
}

}  // namespace

// ---- JsonObject --------------------------------------------------------------------

JsonObject::JsonObject(const nlohmann::json* j, std::shared_ptr<const std::string> file, std::string pointer)
    : j_(j), file_(std::move(file)), pointer_(std::move(pointer)) {
  if (!j_->is_object()) throw ConfigError(*file_, pointer_, fmt::format("expected an object, got {}", j_->type_name()));
}

JsonObject::JsonObject(const JsonDocument& doc)
    : JsonObject(&doc.root, std::make_shared<const std::string>(doc.file), "") {}

std::string JsonObject::child_pointer(std::string_view key) const {
  return pointer_ + "/" + escape_pointer_token(key);
}

void JsonObject::fail(std::string_view key, const std::string& message) const {
  throw ConfigError(*file_, key.empty() ? pointer_ : child_pointer(key), message);
}

JsonValue JsonObject::at(std::string_view key) const {
  known_.emplace(key);
  const auto it = j_->find(std::string(key));
  if (it == j_->end()) fail(key, missing_key_message(*j_, known_, key));
  return JsonValue(&*it, file_, child_pointer(key));
}

std::optional<JsonValue> JsonObject::find(std::string_view key) const {
  known_.emplace(key);
  const auto it = j_->find(std::string(key));
  if (it == j_->end()) return std::nullopt;
  return JsonValue(&*it, file_, child_pointer(key));
}

bool JsonObject::has(std::string_view key) const { return j_->contains(std::string(key)); }

std::vector<std::string> JsonObject::keys() const {
  std::vector<std::string> out;
  for (auto it = j_->begin(); it != j_->end(); ++it) {
    if (kDocumentationKeys.count(it.key())) continue;
    known_.insert(it.key());
    out.push_back(it.key());
  }
  return out;
}

JsonObject JsonObject::object(std::string_view key) const { return at(key).as_object(); }
JsonArray JsonObject::array(std::string_view key) const { return at(key).as_array(); }

std::string JsonObject::string_or(std::string_view key, std::string def) const {
  auto v = find(key);
  return v ? v->as_string() : std::move(def);
}
double JsonObject::quantity_or(std::string_view key, Dimension d, double def) const {
  auto v = find(key);
  return v ? v->as_quantity(d) : def;
}
std::int64_t JsonObject::integer_or(std::string_view key, std::int64_t lo, std::int64_t hi, std::int64_t def) const {
  auto v = find(key);
  return v ? v->as_integer(lo, hi) : def;
}
double JsonObject::number_or(std::string_view key, double lo, double hi, double def) const {
  auto v = find(key);
  return v ? v->as_number_in(lo, hi) : def;
}
bool JsonObject::bool_or(std::string_view key, bool def) const {
  auto v = find(key);
  return v ? v->as_bool() : def;
}
std::string JsonObject::enum_or(std::string_view key, const std::vector<std::string>& choices, std::string def) const {
  auto v = find(key);
  return v ? v->as_enum(choices) : std::move(def);
}

void JsonObject::require_schema(std::string_view name, int major) const {
  // A file of another kind is the usual cause of a missing or other schema: say what it is.
  const std::string kind = describe_json_kind(*j_);
  const std::string hint = kind.empty() ? "" : "; " + kind;
  if (!has("schema")) fail("schema", fmt::format("missing required key (a {} file has \"schema\": \"{}\"){}", name, name, hint));
  const JsonValue schema = at("schema");
  const std::string got = schema.as_string();
  if (got != name) schema.fail(fmt::format("expected schema \"{}\", got \"{}\"{}", name, got, hint));
  const JsonValue version = at("schema_version");
  const std::string v = version.as_string();
  int got_major = -1;
  try {
    got_major = std::stoi(v.substr(0, v.find('.')));
  } catch (const std::exception&) {
    version.fail(fmt::format("expected a version such as \"{}.0\", got \"{}\"", major, v));
  }
  if (got_major != major) {
    version.fail(fmt::format("this perfcast reads {} version {}.x, the file says {}", name, major, v));
  }
}

void JsonObject::finish() const {
  std::vector<std::string> candidates(known_.begin(), known_.end());
  for (auto it = j_->begin(); it != j_->end(); ++it) {
    if (known_.count(it.key()) || kDocumentationKeys.count(it.key())) continue;
    std::string msg = "unknown key";
    const std::string guess = closest_match(it.key(), candidates);
    if (!guess.empty()) msg += fmt::format(" (did you mean \"{}\"?)", guess);
    else if (!candidates.empty()) msg += fmt::format("; known keys here: {}", fmt::join(candidates, ", "));
    fail(it.key(), msg);
  }
}

// ---- JsonArray -------------------------------------------------------------------

JsonValue JsonArray::operator[](std::size_t i) const {
  return JsonValue(&(*j_)[i], file_, pointer_ + "/" + std::to_string(i));
}

void JsonArray::fail(const std::string& message) const { throw ConfigError(*file_, pointer_, message); }

void JsonArray::require_size(std::size_t lo, std::size_t hi) const {
  if (size() < lo || size() > hi) {
    if (hi == std::numeric_limits<std::size_t>::max()) fail(fmt::format("expected at least {} entries, got {}", lo, size()));
    fail(fmt::format("expected {} to {} entries, got {}", lo, hi, size()));
  }
}

// ---- overrides ---------------------------------------------------------------------

std::string to_json_pointer(std::string_view path) {
  if (!path.empty() && path.front() == '/') return std::string(path);
  std::string out;
  std::string token;
  auto flush = [&] {
    out += "/" + escape_pointer_token(token);
    token.clear();
  };
  for (std::size_t i = 0; i < path.size(); ++i) {
    const char c = path[i];
    if (c == '.') {
      if (!token.empty()) flush();
    } else if (c == '[') {
      if (!token.empty()) flush();
      const std::size_t close = path.find(']', i);
      if (close == std::string_view::npos) throw ConfigError("--set", std::string(path), "unbalanced '['");
      token = std::string(path.substr(i + 1, close - i - 1));
      flush();
      i = close;
    } else {
      token += c;
    }
  }
  if (!token.empty()) flush();
  return out;
}

namespace {
void apply_override_checked(JsonDocument& doc, const std::string& ptr_text, std::string_view path, std::string_view value);
}  // namespace

void apply_override(JsonDocument& doc, std::string_view path, std::string_view value) {
  const std::string ptr_text = to_json_pointer(path);
  if (too_deep_at(value)) {
    throw ConfigError("--set", ptr_text, fmt::format("the value nests deeper than {} levels", limits::kMaxJsonDepth));
  }
  try {
    apply_override_checked(doc, ptr_text, path, value);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError("--set", ptr_text, fmt::format("cannot apply the override ({})", e.what()));
  }
}

namespace {
void apply_override_checked(JsonDocument& doc, const std::string& ptr_text, std::string_view path, std::string_view value) {
  if (ptr_text.empty() || ptr_text == "/") throw ConfigError("--set", std::string(path), "empty path");
  nlohmann::json::json_pointer ptr;
  try {
    ptr = nlohmann::json::json_pointer(ptr_text);
  } catch (const nlohmann::json::exception&) {
    throw ConfigError("--set", ptr_text, "malformed path");
  }
  const auto parent = ptr.parent_pointer();
  if (!doc.root.contains(parent)) {
    throw ConfigError("--set", ptr_text, fmt::format("{} has no {}", doc.file, parent.to_string().empty() ? "/" : parent.to_string()));
  }
  nlohmann::json& container = doc.root[parent];
  nlohmann::json parsed = nlohmann::json::parse(value.begin(), value.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) parsed = std::string(value);
  if (container.is_array()) {
    std::size_t idx = 0;
    try {
      idx = std::stoul(ptr.back());
    } catch (const std::exception&) {
      throw ConfigError("--set", ptr_text, "expected an array index");
    }
    if (idx >= container.size()) {
      throw ConfigError("--set", ptr_text, fmt::format("index {} is out of range (the array has {} entries)", idx, container.size()));
    }
    container[idx] = std::move(parsed);
  } else if (container.is_object()) {
    container[ptr.back()] = std::move(parsed);
  } else {
    throw ConfigError("--set", ptr_text, fmt::format("{} holds a {}, not an object or array", parent.to_string(), container.type_name()));
  }
}
}  // namespace

}  // namespace perfcast
