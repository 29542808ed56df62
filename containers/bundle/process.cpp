#include "containers/bundle/process.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace kiln {

Result<ProcessResult> process_run(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
  KILN_REQUIRE(!argv.empty(), invalid_argument, "process_run: no program");
  int out_pipe[2];
  int err_pipe[2];  // reports exec failure: closed on a successful exec (O_CLOEXEC)
  KILN_REQUIRE(pipe(out_pipe) == 0, io, "pipe: ", std::strerror(errno));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return make_error(ErrorCode::io, "pipe: ", std::strerror(errno));
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    const int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, 2);
    close(out_pipe[0]);
    close(out_pipe[1]);
    close(err_pipe[0]);
    for (const std::string& kv : extra_env) putenv(const_cast<char*>(kv.c_str()));
    execvp(args[0], args.data());
    const int e = errno;
    (void)!write(err_pipe[1], &e, sizeof e);
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (pid < 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return make_error(ErrorCode::io, "fork: ", std::strerror(errno));
  }
  ProcessResult result;
  char buf[65536];
  for (;;) {
    const ssize_t n = read(out_pipe[0], buf, sizeof buf);
    if (n > 0) {
      result.out.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(out_pipe[0]);
  int exec_errno = 0;
  const bool exec_failed = read(err_pipe[0], &exec_errno, sizeof exec_errno) == static_cast<ssize_t>(sizeof exec_errno);
  close(err_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  KILN_REQUIRE(!exec_failed, io, "cannot run '", argv[0], "': ", std::strerror(exec_errno));
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace kiln
