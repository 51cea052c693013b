// tests/callables/test_file.c — lw_callable_load_file / lw_callable_free_loaded.
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "callables/digest.h"
#include "callables/image.h"
#include "callables_test_util.h"
#include "lanework/callable.h"

static char tmpdir[64];

static void make_tmpdir(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/lw_test_file_XXXXXX");
  cr_assert_not_null(mkdtemp(tmpdir));
}

static void remove_tmpdir(void) {
  // Only this test's own plain files live here.
  DIR *d = opendir(tmpdir);
  if (d == NULL) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    cr_expect_eq(unlinkat(dirfd(d), e->d_name, 0), 0, "%s: %s", e->d_name, strerror(errno));
  }
  closedir(d);
  cr_expect_eq(rmdir(tmpdir), 0, "%s: %s", tmpdir, strerror(errno));
}

TestSuite(callable_file, .init = make_tmpdir, .fini = remove_tmpdir, .timeout = 30);

static void write_file(const char *path, const void *data, size_t bytes) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
  cr_assert_eq(write(fd, data, bytes), (ssize_t)bytes);
  close(fd);
}

Test(callable_file, so_file_loads_whole_with_name_from_base_name) {
  char path[4096];
  test_kernel_path("vector_add", path, sizeof path);
  size_t n = 0;
  uint8_t *want = test_read_kernel("vector_add", &n);
  int fds = test_count_fds();
  lw_callable_t c;
  cr_assert_eq(lw_callable_load_file(path, &c), LW_OK, "%s", lw_last_error()->message);
  cr_assert_str_eq(c.name, "vector_add");
  cr_assert_str_eq(c.entry, LW_DEFAULT_ENTRY);
  cr_assert_eq(c.n_params, 0);
  cr_assert_null(c.param_dirs);
  cr_assert_eq(c.image_bytes, n);
  cr_assert_eq(memcmp(c.image, want, n), 0);
  lw_digest_t d;
  cr_assert_eq(lw_callable_digest(&c, &d), LW_OK, "%s", lw_last_error()->message);
  lw_callable_free_loaded(&c);
  cr_assert_null(c.image);
  cr_assert_null(c.name);
  lw_callable_free_loaded(&c);  // a freed (zeroed) descriptor may be freed again
  lw_callable_free_loaded(NULL);
  cr_assert_eq(test_count_fds(), fds, "load_file left a descriptor open");
  free(want);
}

Test(callable_file, packed_file_is_kept_compressed_and_digests_like_the_so) {
  size_t n = 0;
  uint8_t *elf = test_read_kernel("noop", &n);
  void *frame = NULL;
  size_t fn = 0;
  lw_error_t err;
  cr_assert_eq(lw__image_pack(elf, n, 3, &frame, &fn, &err), LW_OK, "%s", err.message);
  char path[128];
  snprintf(path, sizeof path, "%s/noop.v2.lwk", tmpdir);
  write_file(path, frame, fn);

  lw_callable_t c;
  cr_assert_eq(lw_callable_load_file(path, &c), LW_OK, "%s", lw_last_error()->message);
  cr_assert_str_eq(c.name, "noop.v2", "only the last extension is dropped");
  cr_assert_eq(c.image_bytes, fn);
  cr_assert(lw__image_is_zstd(c.image, c.image_bytes), "load_file does not decompress");
  lw_digest_t d, want;
  cr_assert_eq(lw_callable_digest(&c, &d), LW_OK, "%s", lw_last_error()->message);
  lw__digest_compute(elf, n, NULL, 0, NULL, &want);
  cr_assert(lw__digest_equal(d, want));
  lw_callable_free_loaded(&c);
  free(frame);
  free(elf);
}

Test(callable_file, missing_file_is_not_found_with_path_and_reason) {
  char path[128];
  snprintf(path, sizeof path, "%s/does_not_exist.so", tmpdir);
  lw_callable_t c = {.name = "stale"};
  cr_assert_eq(lw_callable_load_file(path, &c), LW_NOT_FOUND);
  cr_assert_null(c.name, "out is cleared on failure");
  cr_assert_null(c.image);
  const lw_error_t *e = lw_last_error();
  cr_assert_eq(e->code, LW_NOT_FOUND);
  cr_assert_not_null(strstr(e->message, path), "%s", e->message);
  cr_assert_not_null(strstr(e->message, strerror(ENOENT)), "%s", e->message);
}

Test(callable_file, empty_file_and_directory_are_invalid_argument) {
  char path[128];
  snprintf(path, sizeof path, "%s/empty.so", tmpdir);
  write_file(path, "", 0);
  int fds = test_count_fds();
  lw_callable_t c;
  cr_assert_eq(lw_callable_load_file(path, &c), LW_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(lw_last_error()->message, "empty"), "%s",
                     lw_last_error()->message);
  cr_assert_not_null(strstr(lw_last_error()->message, path), "%s", lw_last_error()->message);
  cr_assert_eq(lw_callable_load_file(tmpdir, &c), LW_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(lw_last_error()->message, "not a regular file"), "%s",
                     lw_last_error()->message);
  cr_assert_eq(lw_callable_load_file(NULL, &c), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw_callable_load_file(path, NULL), LW_INVALID_ARGUMENT);
  cr_assert_eq(test_count_fds(), fds, "a failed load_file left a descriptor open");
}

Test(callable_file, extensionless_and_dot_files_keep_their_whole_name) {
  size_t n = 0;
  uint8_t *elf = test_read_kernel("noop", &n);
  const char *names[][2] = {{"plain", "plain"}, {".hidden", ".hidden"}};
  for (int i = 0; i < 2; i++) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", tmpdir, names[i][0]);
    write_file(path, elf, n);
    lw_callable_t c;
    cr_assert_eq(lw_callable_load_file(path, &c), LW_OK, "%s", lw_last_error()->message);
    cr_assert_str_eq(c.name, names[i][1]);
    lw_callable_free_loaded(&c);
  }
  free(elf);
}

// Runs `lanework pack ARGS...` with stdout and stderr sent to /dev/null; returns the exit code.
// trap_out (may be NULL): before the tool starts, its process plants a symlink to trap_target
// at "<trap_out>.tmp.<its pid>", the temporary name older versions of the tool wrote through.
static int run_pack_trapped(const char *const *args, const char *trap_out,
                            const char *trap_target) {
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    if (trap_out != NULL) {
      char link[256];
      snprintf(link, sizeof link, "%s.tmp.%ld", trap_out, (long)getpid());  // exec keeps the pid
      if (symlink(trap_target, link) != 0) _exit(126);
    }
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    char *argv[8] = {(char *)lw_test_tool_path(), (char *)"pack"};
    for (int i = 0; args[i] != NULL && i < 5; i++) argv[i + 2] = (char *)args[i];
    execv(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status), "status 0x%x", status);
  return WEXITSTATUS(status);
}

static int run_pack(const char *const *args) { return run_pack_trapped(args, NULL, NULL); }

// Whether tmpdir holds a name with ".tmp." in it (a temporary file of the tool left behind);
// the first such name goes to found.
static bool tmpdir_has_temporary(char *found, size_t bytes) {
  DIR *d = opendir(tmpdir);
  cr_assert_not_null(d);
  struct dirent *e;
  bool any = false;
  while (!any && (e = readdir(d)) != NULL) {
    if (strstr(e->d_name, ".tmp.") != NULL) {
      snprintf(found, bytes, "%s", e->d_name);
      any = true;
    }
  }
  closedir(d);
  return any;
}

Test(callable_file, cli_pack_output_loads_and_digests_like_the_so) {
  char so[4096], lwk[128];
  test_kernel_path("vector_add", so, sizeof so);
  snprintf(lwk, sizeof lwk, "%s/vector_add.lwk", tmpdir);
  cr_assert_eq(run_pack((const char *[]){so, "-o", lwk, "--level", "3", NULL}), 0);
  lw_callable_t a, b;
  cr_assert_eq(lw_callable_load_file(so, &a), LW_OK, "%s", lw_last_error()->message);
  cr_assert_eq(lw_callable_load_file(lwk, &b), LW_OK, "%s", lw_last_error()->message);
  cr_assert(lw__image_is_zstd(b.image, b.image_bytes));
  cr_assert_str_eq(b.name, "vector_add");
  lw_digest_t da, db;
  cr_assert_eq(lw_callable_digest(&a, &da), LW_OK);
  cr_assert_eq(lw_callable_digest(&b, &db), LW_OK, "%s", lw_last_error()->message);
  cr_assert(lw__digest_equal(da, db));
  lw_callable_free_loaded(&a);
  lw_callable_free_loaded(&b);

  // Usage errors exit 2; a bad input exits 1 and writes no output.
  cr_assert_eq(run_pack((const char *[]){so, NULL}), 2, "missing -o");
  cr_assert_eq(run_pack((const char *[]){so, "-o", lwk, "--level", "0", NULL}), 2);
  cr_assert_eq(run_pack((const char *[]){so, "-o", lwk, "--bogus", NULL}), 2);
  char junk[128], out[128];
  snprintf(junk, sizeof junk, "%s/junk.so", tmpdir);
  snprintf(out, sizeof out, "%s/junk.lwk", tmpdir);
  write_file(junk, "not an elf", 10);
  cr_assert_eq(run_pack((const char *[]){junk, "-o", out, NULL}), 1);
  cr_assert_neq(access(out, F_OK), 0, "a failed pack left %s behind", out);
  cr_assert_eq(run_pack((const char *[]){lwk, "-o", out, NULL}), 1, "input already packed");
}

Test(callable_file, cli_pack_never_writes_through_a_planted_temporary_name) {
  char so[4096], lwk[128], victim[128], link[512], found[256];
  test_kernel_path("vector_add", so, sizeof so);
  snprintf(lwk, sizeof lwk, "%s/trap.lwk", tmpdir);
  snprintf(victim, sizeof victim, "%s/victim", tmpdir);
  write_file(victim, "precious", 8);
  mode_t mask = umask(022);  // a known umask: the output is then 0644
  int rc = run_pack_trapped((const char *[]){so, "-o", lwk, NULL}, lwk, victim);
  umask(mask);
  cr_assert_eq(rc, 0);
  // The file the symlink pointed to is untouched...
  char buf[16] = {0};
  int fd = open(victim, O_RDONLY | O_CLOEXEC);
  cr_assert_geq(fd, 0);
  cr_assert_eq(read(fd, buf, sizeof buf), 8);
  close(fd);
  cr_assert_str_eq(buf, "precious", "the tool wrote through a planted symlink");
  // ...and the output is a regular file of its own, mode 0644, that loads as a packed image.
  struct stat st;
  cr_assert_eq(lstat(lwk, &st), 0, "%s: %s", lwk, strerror(errno));
  cr_assert(S_ISREG(st.st_mode), "the output is not a regular file (mode 0%o)", st.st_mode);
  cr_assert_eq(st.st_mode & 07777, 0644, "mode 0%o", st.st_mode & 07777);
  lw_callable_t c;
  cr_assert_eq(lw_callable_load_file(lwk, &c), LW_OK, "%s", lw_last_error()->message);
  cr_assert(lw__image_is_zstd(c.image, c.image_bytes));
  lw_callable_free_loaded(&c);
  // The planted symlink is the only ".tmp." name: the tool's own temporary file was renamed.
  DIR *d = opendir(tmpdir);
  cr_assert_not_null(d);
  struct dirent *e;
  int n_tmp = 0;
  while ((e = readdir(d)) != NULL) {
    if (strstr(e->d_name, ".tmp.") == NULL) continue;
    n_tmp++;
    snprintf(link, sizeof link, "%s/%s", tmpdir, e->d_name);
    cr_assert_eq(lstat(link, &st), 0);
    cr_assert(S_ISLNK(st.st_mode), "%s was left behind", e->d_name);
  }
  closedir(d);
  cr_assert_eq(n_tmp, 1);
  cr_assert_eq(unlink(link), 0);
  cr_assert_not(tmpdir_has_temporary(found, sizeof found), "%s", found);
}

Test(callable_file, cli_pack_that_cannot_rename_leaves_no_temporary_file) {
  char so[4096], out[128], found[256];
  test_kernel_path("vector_add", so, sizeof so);
  // The output names a non-empty directory: the temporary file is written, the rename fails.
  snprintf(out, sizeof out, "%s/dir.lwk", tmpdir);
  cr_assert_eq(mkdir(out, 0755), 0);
  char inside[192];
  snprintf(inside, sizeof inside, "%s/keep", out);
  write_file(inside, "x", 1);
  cr_assert_eq(run_pack((const char *[]){so, "-o", out, NULL}), 1);
  cr_assert_not(tmpdir_has_temporary(found, sizeof found), "%s was left behind", found);
  cr_assert_eq(unlink(inside), 0);
  cr_assert_eq(rmdir(out), 0);
  // A folder that does not exist: nothing can be created, and the tool says so.
  snprintf(out, sizeof out, "%s/missing/x.lwk", tmpdir);
  cr_assert_eq(run_pack((const char *[]){so, "-o", out, NULL}), 1);
  cr_assert_not(tmpdir_has_temporary(found, sizeof found), "%s was left behind", found);
}
