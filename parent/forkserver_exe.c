// parent/forkserver_exe.c — main of lanework-forkserver, the helper liblanework execs to make
// a clean fork server for a worker's chip children (parent/fs_helper.h, docs/processes.md).
#include "parent/fs_helper.h"
#include "parent/worker_child.h"

int main(int argc, char **argv) { return lw__fs_helper_main(argc, argv, lw__worker_child_entry); }
