#include "convert/kineto_trace.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <unordered_map>

#include "convert/host_trace.h"
#include "convert/json_capture.h"
#include "convert/json_file.h"

namespace orrery::convert {

namespace {

std::optional<KinetoCategory> category_of(std::string_view cat) {
  if (cat == "cpu_op") return KinetoCategory::kCpuOp;
  if (cat == "user_annotation") return KinetoCategory::kUserAnnotation;
  if (cat == "cuda_runtime" || cat == "cuda_driver") return KinetoCategory::kRuntime;
  if (cat == "kernel") return KinetoCategory::kKernel;
  if (cat == "gpu_memcpy") return KinetoCategory::kMemcpy;
  if (cat == "gpu_memset") return KinetoCategory::kMemset;
  return std::nullopt;
}

// The args the converter keeps whole: what NCCL kernels say about their collective.
bool is_comm_arg(std::string_view key) {
  static constexpr std::array<std::string_view, 10> kKeys = {"Collective name",
                                                             "In msg nelems",
                                                             "Out msg nelems",
                                                             "Group size",
                                                             "dtype",
                                                             "In split size",
                                                             "Out split size",
                                                             "Process Group Name",
                                                             "Process Group Description",
                                                             "Process Group Ranks"};
  return std::find(kKeys.begin(), kKeys.end(), key) != kKeys.end();
}

}  // namespace

std::optional<int64_t> kineto_time_ns(const nlohmann::json& value) {
  if (const std::optional<int64_t> whole = json_int(value)) {
    if (*whole > INT64_MAX / 1000 || *whole < INT64_MIN / 1000) return std::nullopt;
    return *whole * 1000;
  }
  if (value.is_number_float()) {
    const double ns = value.get<double>() * 1000.0;
    if (!std::isfinite(ns) || std::fabs(ns) > 9.0e18) return std::nullopt;
    return static_cast<int64_t>(std::llround(ns));
  }
  return std::nullopt;
}

const nlohmann::json* KinetoTrace::pg_config() const {
  if (!distributed_info_.is_object()) return nullptr;
  const auto found = distributed_info_.find("pg_config");
  if (found == distributed_info_.end() || !found->is_array()) return nullptr;
  return &*found;
}

// nlohmann's SAX interface, turning the stream of a Kineto file into KinetoEvent records. Only
// distributedInfo and the communication args of events are kept as JSON values.
class KinetoReader {
 public:
  KinetoReader(KinetoTrace& trace, const std::string& path, size_t text_size)
      : trace_(trace), text_size_(text_size) {
    trace_.path_ = path;
  }

  std::optional<Error> error;

  Expected<KinetoTrace> finish(KinetoTrace trace) {
    if (error) return *error;
    if (!seen_events_) {
      if (seen_nodes_ && seen_schema_) {
        return Error::make(ErrorKind::kParse,
                           "{}: this is a PyTorch execution trace (it has 'schema' and 'nodes'), "
                           "not a Kineto trace: give it with --host",
                           trace.path_);
      }
      return Error::make(ErrorKind::kParse,
                         "{}: no 'traceEvents' list (expected a Kineto trace from the PyTorch "
                         "profiler)",
                         trace.path_);
    }
    if (trace.array_form_ && trace.total_events_ == 0) {
      return Error::make(ErrorKind::kParse,
                         "{}: a JSON list without trace events (expected a Chrome trace: a list "
                         "of events {{\"name\", \"ph\", \"ts\", \"dur\", ...}})",
                         trace.path_);
    }
    if (trace.distributed_info_.is_object()) {
      const nlohmann::json& info = trace.distributed_info_;
      if (const auto rank = info.find("rank"); rank != info.end()) trace.rank_ = json_int(*rank);
      if (const auto size = info.find("world_size"); size != info.end())
        trace.world_size_ = json_int(*size);
    }
    std::sort(pids_.begin(), pids_.end());
    pids_.erase(std::unique(pids_.begin(), pids_.end()), pids_.end());
    trace.cpu_pids_ = std::move(pids_);
    return trace;
  }

  // ---- nlohmann::json_sax interface ----
  bool null() { return scalar(nlohmann::json()); }
  bool boolean(bool value) { return scalar(nlohmann::json(value)); }
  bool number_integer(int64_t value) { return scalar(nlohmann::json(value)); }
  bool number_unsigned(uint64_t value) { return scalar(nlohmann::json(value)); }
  bool number_float(double value, const std::string& /*text*/) {
    return scalar(nlohmann::json(value));
  }
  bool string(std::string& value) { return scalar(nlohmann::json(std::move(value))); }
  bool binary(nlohmann::json::binary_t& /*value*/) { return scalar(nlohmann::json()); }
  bool start_object(std::size_t /*elements*/) { return open(true); }
  bool start_array(std::size_t /*elements*/) { return open(false); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(std::string& name) {
    if (!stack_.empty() && stack_.back() == Ctx::kRoot) {
      seen_nodes_ = seen_nodes_ || name == "nodes";
      seen_schema_ = seen_schema_ || name == "schema";
    }
    key_ = std::move(name);
    return true;
  }
  bool parse_error(std::size_t position, const std::string& /*token*/,
                   const nlohmann::detail::exception& failure) {
    error = json_parse_error(trace_.path_, position, text_size_, failure.what());
    return false;
  }

 private:
  enum class Ctx : uint8_t { kRoot, kEvents, kEvent, kArgs, kCapture, kSkip };

  // The event being read.
  struct Pending {
    std::string ph;
    std::string cat;
    std::optional<std::string> name;
    nlohmann::json pid;
    nlohmann::json tid;
    nlohmann::json ts;
    nlohmann::json dur;
    int64_t external_id = -1;
    int64_t correlation = -1;
    int64_t stream = -1;
    int64_t record_function_id = -1;
    nlohmann::json comm_args;
  };

  bool open(bool object) {
    if (stack_.empty()) {
      if (!object) {
        // The Chrome trace format's other form: the events as a bare list (what the profiler
        // exports without Kineto: {"name", "ph", "ts", "dur", "tid", "pid": "CPU functions"}).
        trace_.array_form_ = true;
        seen_events_ = true;
        stack_.push_back(Ctx::kEvents);
        return true;
      }
      stack_.push_back(Ctx::kRoot);
      return true;
    }
    switch (stack_.back()) {
      case Ctx::kRoot:
        if (key_ == "traceEvents" && !object) {
          seen_events_ = true;
          stack_.push_back(Ctx::kEvents);
        } else if (key_ == "distributedInfo" && object) {
          capture_.begin(trace_.distributed_info_, true);
          stack_.push_back(Ctx::kCapture);
        } else {
          stack_.push_back(Ctx::kSkip);
        }
        return true;
      case Ctx::kEvents:
        if (object) {
          event_ = Pending();
          stack_.push_back(Ctx::kEvent);
        } else {
          stack_.push_back(Ctx::kSkip);
        }
        return true;
      case Ctx::kEvent:
        stack_.push_back(key_ == "args" && object ? Ctx::kArgs : Ctx::kSkip);
        return true;
      case Ctx::kArgs:
        if (is_comm_arg(key_)) {
          if (!event_.comm_args.is_object()) event_.comm_args = nlohmann::json::object();
          capture_.begin(event_.comm_args[key_], object);
          stack_.push_back(Ctx::kCapture);
        } else {
          stack_.push_back(Ctx::kSkip);
        }
        return true;
      case Ctx::kCapture:
        capture_.open(key_, object);
        stack_.push_back(Ctx::kCapture);
        return true;
      case Ctx::kSkip:
        stack_.push_back(Ctx::kSkip);
        return true;
    }
    return true;
  }

  bool close() {
    const Ctx top = stack_.back();
    stack_.pop_back();
    if (top == Ctx::kCapture) capture_.close();
    if (top == Ctx::kEvent) return finish_event();
    return true;
  }

  bool scalar(nlohmann::json value) {
    if (stack_.empty()) return true;
    switch (stack_.back()) {
      case Ctx::kEvent:
        if (key_ == "ph" && value.is_string()) {
          event_.ph = value.get<std::string>();
        } else if (key_ == "cat" && value.is_string()) {
          event_.cat = value.get<std::string>();
        } else if (key_ == "name" && value.is_string()) {
          event_.name = value.get<std::string>();
        } else if (key_ == "pid") {
          event_.pid = std::move(value);
        } else if (key_ == "tid") {
          event_.tid = std::move(value);
        } else if (key_ == "ts") {
          event_.ts = std::move(value);
        } else if (key_ == "dur") {
          event_.dur = std::move(value);
        }
        return true;
      case Ctx::kArgs:
        if (is_comm_arg(key_)) {
          if (!event_.comm_args.is_object()) event_.comm_args = nlohmann::json::object();
          event_.comm_args[key_] = std::move(value);
        } else if (key_ == "External id") {
          event_.external_id = json_int(value).value_or(-1);
        } else if (key_ == "correlation") {
          event_.correlation = json_int(value).value_or(-1);
        } else if (key_ == "stream") {
          event_.stream = json_int(value).value_or(-1);
        } else if (key_ == "Record function id") {
          event_.record_function_id = json_int(value).value_or(-1);
        }
        return true;
      case Ctx::kCapture:
        capture_.value(key_, std::move(value));
        return true;
      default:
        return true;
    }
  }

  // Thread and process ids that are not numbers ("Spans", "PyTorch Profiler") get negative ids.
  int64_t id_of(const nlohmann::json& value) {
    if (value.is_null()) return 0;
    if (const std::optional<int64_t> number = json_int(value)) return *number;
    const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    const auto [found, inserted] =
        named_ids_.emplace(text, -1 - static_cast<int64_t>(named_ids_.size()));
    return found->second;
  }

  std::string_view intern(const std::string& name) {
    const auto found = names_index_.find(name);
    if (found != names_index_.end()) return found->second;
    const std::string& stored = trace_.names_.emplace_back(name);
    names_index_.emplace(stored, stored);
    return stored;
  }

  bool finish_event() {
    const size_t position = trace_.total_events_++;
    // Without Kineto every complete event is a CPU function, and none has a category.
    const bool cpu_function = trace_.array_form_ && event_.cat.empty();
    const std::optional<KinetoCategory> category =
        event_.ph != "X" ? std::nullopt
        : cpu_function   ? std::optional<KinetoCategory>(KinetoCategory::kCpuOp)
                         : category_of(event_.cat);
    if (!category) {
      ++trace_.ignored_[event_.cat.empty() ? "phase " + event_.ph : event_.cat];
      return true;
    }
    if (!event_.name) {
      error = Error::make(ErrorKind::kParse, "{}: traceEvents[{}] ({} event) has no name",
                          trace_.path_, position, event_.cat);
      return false;
    }
    KinetoEvent record;
    record.category = *category;
    record.name = intern(*event_.name);
    const std::optional<int64_t> ts = kineto_time_ns(event_.ts);
    if (!ts) {
      error = Error::make(ErrorKind::kParse,
                          "{}: traceEvents[{}] ({} '{}'): no usable 'ts' (expected microseconds)",
                          trace_.path_, position, event_.cat, record.name);
      return false;
    }
    record.ts_ns = *ts;
    record.dur_ns = kineto_time_ns(event_.dur).value_or(-1);
    if (record.dur_ns < 0) {
      error = Error::make(ErrorKind::kParse,
                          "{}: traceEvents[{}] ({} '{}'): no usable 'dur' (expected microseconds)",
                          trace_.path_, position, event_.cat, record.name);
      return false;
    }
    record.pid = id_of(event_.pid);
    record.tid = id_of(event_.tid);
    record.external_id = event_.external_id;
    record.correlation = event_.correlation;
    record.stream = event_.stream;
    record.record_function_id = event_.record_function_id;
    if (event_.comm_args.is_object()) {
      record.args = &trace_.args_.emplace_back(std::move(event_.comm_args));
    }
    // Only process ids that are numbers can be compared with the host trace's ("CPU functions"
    // cannot).
    if (record.is_cpu() && event_.pid.is_number_integer()) pids_.push_back(record.pid);
    trace_.events_.push_back(record);
    return true;
  }

  KinetoTrace& trace_;
  size_t text_size_;
  std::vector<Ctx> stack_;
  std::string key_;
  JsonCapture capture_;
  Pending event_;
  std::unordered_map<std::string, int64_t> named_ids_;
  std::unordered_map<std::string_view, std::string_view> names_index_;
  std::vector<int64_t> pids_;
  bool seen_events_ = false;
  bool seen_nodes_ = false;
  bool seen_schema_ = false;
};

Expected<KinetoTrace> parse_kineto_text(const std::string& path, const std::string& text) {
  KinetoTrace trace;
  KinetoReader reader(trace, path, text.size());
  nlohmann::json::sax_parse(text, &reader);
  return reader.finish(std::move(trace));
}

Expected<KinetoTrace> read_kineto_trace(const std::string& path) {
  Expected<std::string> text = read_file_text(path);
  if (!text) return text.error();
  return parse_kineto_text(path, *text);
}

Expected<KinetoTrace> parse_kineto_trace(const std::string& path, const nlohmann::json& doc) {
  return parse_kineto_text(path, doc.dump());
}

}  // namespace orrery::convert
