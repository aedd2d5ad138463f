// convert/json_capture.h: the values a streaming (SAX) trace reader keeps whole, as JSON.
//
// The host and Kineto readers parse with nlohmann's SAX interface, so that a trace of millions of
// events never exists as one JSON tree. The few values they keep as JSON (a node attribute's value,
// Kineto's distributedInfo and the communication arguments of an event) are built here from the
// same stream of events: begin() at the value's first container, then open(), value() and close()
// for what lies inside it, until close() ends the value itself.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace orrery::convert {

class JsonCapture {
 public:
  // Starts building into `target`, which becomes an empty object or array as `object` says.
  void begin(nlohmann::json& target, bool object) {
    target = empty(object);
    open_.assign(1, &target);
  }

  // A container inside the value being built: under `key` in an object, appended to an array.
  void open(const std::string& key, bool object) { open_.push_back(&insert(key, empty(object))); }

  // A number, string, boolean or null inside the value being built.
  void value(const std::string& key, nlohmann::json value) { insert(key, std::move(value)); }

  // The innermost open container (at last the value itself) ends.
  void close() { open_.pop_back(); }

 private:
  static nlohmann::json empty(bool object) {
    return object ? nlohmann::json::object() : nlohmann::json::array();
  }

  nlohmann::json& insert(const std::string& key, nlohmann::json value) {
    nlohmann::json& parent = *open_.back();
    if (!parent.is_array()) return parent[key] = std::move(value);
    parent.push_back(std::move(value));
    return parent.back();
  }

  std::vector<nlohmann::json*> open_;
};

}  // namespace orrery::convert
