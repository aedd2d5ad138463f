// `orrery report` as a user runs it: `orrery run --output` on the bundled example, then the HTML
// page opened in Debian's headless Chromium (the charts are in the rendered DOM, the console stays
// silent, a screenshot is kept in the build tree), and clean failures for bad input.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "chakra/trace_builder.h"
#include "core/units.h"
#include "e2e/run_command.h"

namespace orrery {
namespace report_cli_test {

using test::TempDir;

std::string example(const std::string& file) {
  return std::string(ORRERY_TEST_DATA_DIR) + "/../../examples/llama_dp2tp2pp2/" + file;
}

// Runs the bundled example and writes its JSON result to `path`.
void run_example(const std::string& path) {
  const CommandResult result =
      run_orrery({"run", "-q", "-o", path, "--workload-configuration=" + example("workload"),
                  "--comm-group-configuration=" + example("workload.json"),
                  "--system-configuration=" + example("system.json"),
                  "--network-configuration=" + example("network.yml")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++count;
  return count;
}

// The chromium executable: $ORRERY_CHROMIUM, or chromium (or chromium-browser) on the PATH.
std::string find_chromium() {
  if (const char* given = std::getenv("ORRERY_CHROMIUM"); given && *given) return given;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    for (const char* name : {"chromium", "chromium-browser"}) {
      const std::filesystem::path candidate = std::filesystem::path(dir) / name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    }
  }
  return "";
}

// Width and height from a PNG's IHDR chunk; {0, 0} when `bytes` is not a PNG.
std::pair<uint32_t, uint32_t> png_size(const std::string& bytes) {
  if (bytes.size() < 24 || bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return {0, 0};
  auto be32 = [&](size_t at) {
    uint32_t value = 0;
    for (size_t idx = 0; idx < 4; ++idx)
      value = (value << 8) | static_cast<uint8_t>(bytes[at + idx]);
    return value;
  };
  return {be32(16), be32(20)};
}

// Chromium's log lines for console messages ("...:INFO:CONSOLE:1] "text", source: ...").
std::vector<std::string> console_lines(const std::string& log) {
  std::vector<std::string> lines;
  std::stringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("CONSOLE") != std::string::npos) lines.push_back(line);
  }
  return lines;
}

std::string tail(const std::string& text, size_t chars = 3000) {
  return text.size() <= chars ? text : "..." + text.substr(text.size() - chars);
}

// The whole journey: run, report, render in a real browser. One Chromium launch gives the DOM
// (stdout), the console (stderr) and the screenshot, in about 5 s on two cores.
TEST(ReportCli, the_example_report_renders_in_chromium_without_console_errors) {
  const std::string chromium = find_chromium();
  ASSERT_FALSE(chromium.empty())
      << "chromium is not installed: scripts/install-deps.sh installs Debian's chromium package "
         "(or set ORRERY_CHROMIUM to a Chromium executable)";

  // Kept in the build tree to be looked at: result.json, report.html, report.png.
  const std::filesystem::path out = std::filesystem::path(ORRERY_E2E_OUTPUT_DIR) / "report";
  std::filesystem::create_directories(out);
  const std::string json_path = (out / "result.json").string();
  const std::string html_path = (out / "report.html").string();
  const std::string png_path = (out / "report.png").string();
  std::filesystem::remove(html_path);
  std::filesystem::remove(png_path);

  run_example(json_path);
  std::ifstream json_in(json_path);
  const auto result = nlohmann::json::parse(json_in);
  const CommandResult report = run_orrery({"report", json_path, "-o", html_path});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_EQ(report.out, "wrote " + html_path + "\n");

  // A fresh profile and home, so that nothing from an earlier run or the user is used.
  TempDir profile;
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::string> args = {"--kill-after=5", "90", "env"};
  for (const char* dir : {"HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"})
    args.push_back(std::string(dir) + "=" + profile.file(dir));
  args.push_back(chromium);
  for (const char* flag :
       {"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--enable-logging=stderr", "--v=0", "--hide-scrollbars",
        "--window-size=1280,2400", "--dump-dom"}) {
    args.emplace_back(flag);
  }
  args.push_back("--user-data-dir=" + profile.file("profile"));
  args.push_back("--screenshot=" + png_path);
  args.push_back("file://" + html_path);
  const CommandResult browser = run_program("timeout", args);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << fmt::format(
      "[ report   ] chromium rendered {} in {:.1f} s\n"
      "[ report   ] screenshot: {}\n",
      html_path, seconds, png_path);
  RecordProperty("screenshot", png_path);
  ASSERT_NE(browser.exit_code, 124) << "chromium did not finish within 90 s; its log:\n"
                                    << tail(browser.err);
  ASSERT_EQ(browser.exit_code, 0) << "chromium failed (" << chromium << "); its log:\n"
                                  << tail(browser.err);
  const std::string& dom = browser.out;
  ASSERT_NE(dom.find("</html>"), std::string::npos) << "chromium printed no DOM; its log:\n"
                                                    << tail(browser.err);

  // Nothing on the console: no script errors, no resource that failed to load.
  const std::vector<std::string> console = console_lines(browser.err);
  EXPECT_TRUE(console.empty()) << "console messages:\n"
                               << [&] {
                                    std::string all;
                                    for (const std::string& line : console) all += line + "\n";
                                    return all;
                                  }();

  // The summary, from the run's own figures.
  const auto& summary = result["summary"];
  EXPECT_NE(dom.find(format_count(summary["simulated_ns"].get<uint64_t>()) + " ns"),
            std::string::npos);
  EXPECT_NE(dom.find(fmt::format("<div class=\"value\">{}</div>",
                                 summary["slowest_rank"].get<int64_t>())),
            std::string::npos);
  EXPECT_NE(dom.find(">" + format_count(summary["messages"].get<uint64_t>()) + "<"),
            std::string::npos);
  // One bar per rank, every collective chart row, one bar per dimension.
  EXPECT_NE(dom.find("id=\"breakdown-chart\""), std::string::npos);
  EXPECT_EQ(count_of(dom, "<g class=\"rank-bar\""), 8u);
  EXPECT_EQ(count_of(dom, "<g class=\"collective-bar\""), 10u);
  EXPECT_EQ(count_of(dom, "<g class=\"dimension-bar\""), result["dimensions"].size());
  EXPECT_EQ(count_of(dom, "<svg "), 4u) << "four charts";
  // The longest collective comes first.
  int64_t longest = 0;
  for (const auto& collective : result["collectives"])
    longest = std::max(longest, collective["duration_ns"].get<int64_t>());
  const size_t first_bar = dom.find("<g class=\"collective-bar\"");
  EXPECT_EQ(dom.find(fmt::format("data-duration-ns=\"{}\"", longest)),
            first_bar + std::string("<g class=\"collective-bar\" ").size());

  // The screenshot: a PNG of the window's size with something drawn on it (a blank page of this
  // size compresses to a few kilobytes).
  const std::string png = read_whole_file(png_path);
  EXPECT_EQ(png_size(png), std::make_pair(1280u, 2400u)) << png_path;
  EXPECT_GT(png.size(), 40'000u) << png_path << " looks blank";
}

TEST(ReportCli, help_documents_the_verb) {
  const CommandResult result = run_orrery({"report", "--help"});
  EXPECT_EQ(result.exit_code, 0);
  for (const char* text : {"orrery run --output", "-o,--output", "--top", "--max-rank-bars",
                           "docs/formats/report.md"}) {
    EXPECT_NE(result.out.find(text), std::string::npos) << text << "\n" << result.out;
  }
  EXPECT_NE(run_orrery({"--help"}).out.find("report"), std::string::npos);
}

TEST(ReportCli, the_same_result_gives_the_same_page_and_a_default_name) {
  TempDir dir;
  run_example(dir.file("r.json"));
  ASSERT_EQ(run_orrery({"report", dir.file("r.json"), "-o", dir.file("a.html")}).exit_code, 0);
  const CommandResult again = run_orrery({"report", dir.file("r.json")});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, "wrote " + dir.file("r.html") + "\n");
  EXPECT_EQ(read_whole_file(dir.file("a.html")), read_whole_file(dir.file("r.html")));
  const CommandResult to_stdout = run_orrery({"report", dir.file("r.json"), "-o", "-"});
  EXPECT_EQ(to_stdout.out, read_whole_file(dir.file("a.html")));
}

// ---- failures: one message, exit 1, no page ----

void expect_failure(const CommandResult& result, const std::string& message) {
  EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
  EXPECT_EQ(result.err, "orrery: error: " + message + "\n");
}

TEST(ReportCliBadInput, a_missing_file) {
  TempDir dir;
  expect_failure(run_orrery({"report", dir.file("none.json"), "-o", dir.file("r.html")}),
                 dir.file("none.json") + ": cannot open: No such file or directory");
  EXPECT_FALSE(std::filesystem::exists(dir.file("r.html")));
  // A folder opens on Linux and reads as nothing: refused, not read as an empty result.
  std::filesystem::create_directory(dir.file("folder"));
  expect_failure(run_orrery({"report", dir.file("folder"), "-o", dir.file("r.html")}),
                 dir.file("folder") + ": is a folder, not a file");
}

TEST(ReportCliBadInput, a_file_that_is_not_json) {
  TempDir dir;
  std::ofstream(dir.file("r.json")) << "sys[0] finished, 236212 cycles\n";
  const CommandResult result = run_orrery({"report", dir.file("r.json"), "-o", dir.file("r.html")});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err.rfind("orrery: error: " + dir.file("r.json") +
                                 ": not JSON: parse error at line 1, column 1",
                             0),
            0u)
      << result.err;
  EXPECT_EQ(count_of(result.err, "\n"), 1u) << result.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("r.html")));
}

TEST(ReportCliBadInput, json_of_another_kind) {
  TempDir dir;
  std::ofstream(dir.file("timeline.json")) << R"({"traceEvents": []})";
  expect_failure(
      run_orrery({"report", dir.file("timeline.json"), "-o", dir.file("r.html")}),
      dir.file("timeline.json") +
          ": missing \"format\": not an orrery-run/1 document (`orrery run --output` writes one)");
  EXPECT_FALSE(std::filesystem::exists(dir.file("r.html")));
}

TEST(ReportCliBadInput, a_result_with_a_mistyped_key) {
  TempDir dir;
  run_example(dir.file("r.json"));
  std::ifstream in(dir.file("r.json"));
  auto json = nlohmann::json::parse(in);
  json["ranks"][2]["compute_ns"] = "3472";
  std::ofstream(dir.file("bad.json")) << json.dump();
  expect_failure(run_orrery({"report", dir.file("bad.json")}),
                 dir.file("bad.json") + ": ranks[2].compute_ns: expected a number, found a string");
}

}  // namespace report_cli_test
}  // namespace orrery
