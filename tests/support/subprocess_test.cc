// Child processes, pipes and frames, against real programs (/bin/cat, /bin/sh).
#include "tensortune/support/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/test_util.h"

namespace tensortune {
namespace {

using namespace std::chrono_literals;

Subprocess shell(const std::string& script, SpawnOptions options = {}) {
  return Subprocess::spawn({"/bin/sh", "-c", script}, options);
}

/// Reads the child's stdout up to the next newline.
std::string read_line(Subprocess& child) {
  std::string line;
  char c;
  while (child.read_exact(&c, 1, std::chrono::seconds(5)) && c != '\n') line += c;
  return line;
}

/// True once `pid` is gone or a zombie nobody will wait for (not ours to reap);
/// waits up to 10 s, since a loaded machine may be slow to deliver SIGKILL.
bool process_gone(pid_t pid) {
  for (int i = 0; i < 1000; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    if (!stat) return true;
    std::string line;
    std::getline(stat, line);
    auto close_paren = line.rfind(')');
    if (close_paren != std::string::npos && line.size() > close_paren + 2 &&
        line[close_paren + 2] == 'Z') {
      return true;
    }
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

TEST(Subprocess, CatEchoesBytes) {
  Subprocess cat = Subprocess::spawn({"/bin/cat"});
  cat.write_all("hello, cat");
  char buffer[10];
  ASSERT_TRUE(cat.read_exact(buffer, sizeof buffer, 5s));
  EXPECT_EQ(std::string(buffer, sizeof buffer), "hello, cat");
  cat.close_stdin();
  EXPECT_FALSE(cat.read_exact(buffer, 1, 5s));  // clean end of stream
  ExitStatus status = cat.wait();
  EXPECT_TRUE(status.success()) << status.str();
  EXPECT_EQ(cat.wait(), status);  // idempotent
  EXPECT_FALSE(cat.running());
}

TEST(Subprocess, FramesRoundTripThroughCat) {
  Subprocess cat = Subprocess::spawn({"cat"});  // found through PATH
  const std::vector<std::string> payloads = {"", "x", std::string(1000, '\0'), "{\"a\": 1}"};
  for (const auto& p : payloads) cat.write_frame(p, 5s);
  for (const auto& p : payloads) {
    auto back = cat.read_frame(5s);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, p);
  }
  cat.close_stdin();
  EXPECT_FALSE(cat.read_frame(5s).has_value());
  EXPECT_TRUE(cat.wait().success());
}

TEST(Subprocess, LargeFrameThroughAChildThatReadsEverythingFirst) {
  // Like a worker: the child reads its whole request before replying, so a
  // frame far larger than a pipe buffer must flow without deadlock.
  Subprocess child = shell("f=$(mktemp) && cat > \"$f\" && cat \"$f\" && rm -f \"$f\"");
  std::string big(3 << 20, 'a');
  for (size_t i = 0; i < big.size(); i += 4097) big[i] = static_cast<char>(i % 251);
  child.write_frame(big, 30s);
  child.close_stdin();
  auto back = child.read_frame(30s);
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(*back == big);
  EXPECT_FALSE(child.read_frame(5s).has_value());
  EXPECT_TRUE(child.wait().success()) << child.stderr_text();
}

TEST(Subprocess, ExitCodeAndCapturedStderr) {
  Subprocess child = shell("echo oops >&2; exit 3");
  ExitStatus status = child.wait();
  EXPECT_TRUE(status.exited());
  EXPECT_EQ(status.code, 3);
  EXPECT_EQ(status.str(), "exit code 3");
  EXPECT_EQ(child.stderr_text(), "oops\n");
}

TEST(Subprocess, ChildKilledBySignalEvenIfTheParentIgnoresIt) {
  // An ignored signal survives exec; the child must get default dispositions.
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ASSERT_EQ(sigaction(SIGPIPE, &ignore, &old), 0);
  Subprocess child = shell("kill -PIPE $$; sleep 5");
  ExitStatus status = child.wait();
  sigaction(SIGPIPE, &old, nullptr);
  EXPECT_FALSE(status.exited());
  EXPECT_EQ(status.signal, SIGPIPE);
  EXPECT_NE(status.str().find("signal 13"), std::string::npos) << status.str();
}

TEST(Subprocess, ReadTimeout) {
  Subprocess cat = Subprocess::spawn({"/bin/cat"});
  char byte;
  auto start = std::chrono::steady_clock::now();
  try {
    cat.read_exact(&byte, 1, 100ms);
    FAIL() << "no timeout";
  } catch (const TimeoutError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIO);
    EXPECT_NE(std::string(e.what()).find("timed out after 100 ms"), std::string::npos) << e.what();
  }
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, 100ms);
  EXPECT_LT(elapsed, 5s);
  EXPECT_TRUE(cat.running());
  EXPECT_FALSE(cat.try_wait().has_value());
  EXPECT_THROW(cat.read_frame(50ms), TimeoutError);
}

TEST(Subprocess, WaitForTimesOutThenKillEndsTheChild) {
  Subprocess child = shell("sleep 30");
  EXPECT_FALSE(child.wait_for(50ms).has_value());
  child.kill(SIGTERM);
  ExitStatus status = child.wait();
  EXPECT_EQ(status.signal, SIGTERM);
}

TEST(Subprocess, DestructorLeavesNoZombieAndKillsTheGroup) {
  pid_t pid = -1, grandchild = -1;
  {
    Subprocess child = shell("sleep 30 & echo $!; wait");
    pid = child.pid();
    grandchild = std::stoi(read_line(child));
  }
  // Reaped: waitpid has nothing to wait for.
  errno = 0;
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
  EXPECT_TRUE(process_gone(pid));
  // The grandchild was in the child's process group and died with it.
  EXPECT_TRUE(process_gone(grandchild));
}

TEST(Subprocess, WaitKillsWhatIsLeftOfTheGroup) {
  Subprocess child = shell("sleep 30 & echo $!");
  pid_t grandchild = std::stoi(read_line(child));
  EXPECT_TRUE(child.wait().success());
  EXPECT_TRUE(process_gone(grandchild));
}

TEST(Subprocess, MuchStderrWhileTheParentReadsStdoutDoesNotDeadlock) {
  Subprocess child = shell("head -c 1000000 /dev/zero >&2; echo done");
  char buffer[5];
  ASSERT_TRUE(child.read_exact(buffer, sizeof buffer, 20s));
  EXPECT_EQ(std::string(buffer, 5), "done\n");
  EXPECT_TRUE(child.wait().success());
  EXPECT_EQ(child.stderr_text().size(), 1000000u);
}

TEST(Subprocess, CaptureKeepsHeadAndTail) {
  RunResult r = run_captured(
      {"/bin/sh", "-c", "echo first; head -c 3000000 /dev/zero | tr '\\0' x; echo; echo last"}, {},
      20s);
  EXPECT_TRUE(r.status.success());
  EXPECT_EQ(r.out.rfind("first\n", 0), 0u);
  EXPECT_NE(r.out.find(" bytes dropped ...]"), std::string::npos);
  EXPECT_EQ(r.out.substr(r.out.size() - 5), "last\n");
  EXPECT_LT(r.out.size(), kCaptureKeepBytes + 100);
}

TEST(Subprocess, RunCapturedTimesOut) {
  auto start = std::chrono::steady_clock::now();
  RunResult r = run_captured({"/bin/sh", "-c", "echo started; sleep 30"}, {}, 200ms);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.status.signal, SIGKILL);
  EXPECT_EQ(r.out, "started\n");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST(Subprocess, EnvironmentAndWorkingDirectory) {
  SpawnOptions options;
  options.env = {{"TT_SUBPROCESS_TEST", "one"}, {"TT_SUBPROCESS_TEST", "two"}};
  options.working_dir = "/tmp";
  RunResult r = run_captured({"/bin/sh", "-c", "echo \"$TT_SUBPROCESS_TEST $(pwd)\""}, options);
  EXPECT_EQ(r.out, "two /tmp\n");

  ::setenv("TT_SUBPROCESS_PARENT_ONLY", "x", 1);
  SpawnOptions clean;
  clean.inherit_env = false;
  clean.env = {{"ONLY", "this"}};
  r = run_captured({"/bin/sh", "-c", "echo \"${TT_SUBPROCESS_PARENT_ONLY-unset} $ONLY\""}, clean);
  EXPECT_EQ(r.out, "unset this\n");
  ::unsetenv("TT_SUBPROCESS_PARENT_ONLY");
}

TEST(Subprocess, ChildInheritsNoOtherDescriptors) {
  // Deliberately not close-on-exec: the child must still not see it.
  int leaky = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(leaky, 3);
  RunResult r = run_captured({"/bin/sh", "-c", "ls /proc/$$/fd"});
  ::close(leaky);
  std::istringstream fds(r.out);
  std::string fd;
  std::vector<std::string> open_fds;
  while (fds >> fd) open_fds.push_back(fd);
  EXPECT_EQ(open_fds, (std::vector<std::string>{"0", "1", "2"})) << r.out;
}

TEST(Subprocess, NewProcessGroupByDefault) {
  // Field 5 of /proc/PID/stat is the process group: the child leads its own.
  Subprocess child = shell("cut -d' ' -f5 /proc/$$/stat");
  EXPECT_EQ(std::stoi(read_line(child)), child.pid());
  EXPECT_TRUE(child.wait().success());

  SpawnOptions same_group;
  same_group.new_process_group = false;
  Subprocess sibling = shell("cut -d' ' -f5 /proc/$$/stat", same_group);
  EXPECT_EQ(std::stoi(read_line(sibling)), ::getpgrp());
  EXPECT_TRUE(sibling.wait().success());
}

TEST(Subprocess, MissingProgramIsAnIOError) {
  EXPECT_TT_ERROR(Subprocess::spawn({"/nonexistent/program"}), kIO, "No such file or directory");
  EXPECT_TT_ERROR(Subprocess::spawn({"no-such-program-tensortune"}), kIO, "posix_spawnp");
  EXPECT_TT_ERROR(Subprocess::spawn({}), kInvalidArgument, "argument list is empty");
  SpawnOptions bad;
  bad.stderr_mode = StreamMode::kPipe;
  EXPECT_TT_ERROR(Subprocess::spawn({"/bin/true"}, bad), kInvalidArgument, "stderr");
}

TEST(Subprocess, WriteToAnExitedChildIsAnErrorNotASignal) {
  Subprocess child = Subprocess::spawn({"/bin/true"});
  child.wait();
  // Without SIGPIPE protection this would kill the test program.
  EXPECT_TT_ERROR(child.write_all("x"), kIO, "Broken pipe");
  EXPECT_TT_ERROR(child.write_frame("payload"), kIO, "Broken pipe");
}

TEST(Subprocess, MoveKeepsOwnership) {
  Subprocess a = Subprocess::spawn({"/bin/cat"});
  pid_t pid = a.pid();
  Subprocess b = std::move(a);
  EXPECT_EQ(b.pid(), pid);
  b.write_all("z");
  char c;
  ASSERT_TRUE(b.read_exact(&c, 1, 5s));
  EXPECT_EQ(c, 'z');
  a = std::move(b);
  a.close_stdin();
  EXPECT_TRUE(a.wait().success());
}

// ---- frames on plain descriptors ----

struct PipePair {
  int read_end = -1, write_end = -1;
  PipePair() {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    read_end = fds[0];
    write_end = fds[1];
  }
  ~PipePair() {
    if (read_end >= 0) ::close(read_end);
    if (write_end >= 0) ::close(write_end);
  }
  void close_write() {
    ::close(write_end);
    write_end = -1;
  }
};

TEST(Frames, HeaderIsEightBytesLittleEndian) {
  PipePair p;
  write_frame(p.write_end, "abc");
  char raw[11];
  ASSERT_TRUE(read_exact(p.read_end, raw, sizeof raw, 1s));
  EXPECT_EQ(std::string(raw, sizeof raw), std::string("\x03\0\0\0\0\0\0\0abc", 11));
}

TEST(Frames, CleanEndOfStream) {
  PipePair p;
  write_frame(p.write_end, "one");
  p.close_write();
  EXPECT_EQ(read_frame(p.read_end), "one");
  EXPECT_EQ(read_frame(p.read_end), std::nullopt);
}

TEST(Frames, EndOfStreamInsideAFrameNamesTheMissingBytes) {
  PipePair p;
  write_all(p.write_end, std::string("\x08\0\0\0\0\0\0\0abc", 11));
  p.close_write();
  EXPECT_TT_ERROR(read_frame(p.read_end, 1s, kMaxFrameSize, "test pipe"), kIO,
                  "test pipe: end of stream inside a frame of 8 bytes: 5 bytes missing");
}

TEST(Frames, EndOfStreamInsideAHeader) {
  PipePair p;
  write_all(p.write_end, std::string("\x08\0\0", 3));
  p.close_write();
  EXPECT_TT_ERROR(read_frame(p.read_end), kIO, "inside a frame header: 5 of 8 bytes missing");
}

TEST(Frames, OversizedFrameIsRejectedBeforeAllocating) {
  PipePair p;
  write_all(p.write_end, std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8));
  EXPECT_TT_ERROR(read_frame(p.read_end), kIO, "exceeds the limit of 1073741824 bytes");
  PipePair q;
  write_frame(q.write_end, std::string(100, 'x'));
  EXPECT_TT_ERROR(read_frame(q.read_end, 1s, 99), kIO,
                  "frame of 100 bytes exceeds the limit of 99");
}

TEST(Frames, ReadTimeoutOnAQuietPipe) {
  PipePair p;
  EXPECT_THROW(read_frame(p.read_end, 50ms), TimeoutError);
  // A frame whose payload never comes also times out, as a whole.
  write_all(p.write_end, std::string("\x04\0\0\0\0\0\0\0ab", 10));
  EXPECT_THROW(read_frame(p.read_end, 50ms), TimeoutError);
}

TEST(Frames, WriteToAClosedPipeIsAnError) {
  PipePair p;
  ::close(p.read_end);
  p.read_end = -1;
  EXPECT_TT_ERROR(write_frame(p.write_end, "x", "test pipe"), kIO, "test pipe: write failed");
}

}  // namespace
}  // namespace tensortune
