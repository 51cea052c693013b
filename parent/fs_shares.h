// parent/fs_shares.h — the shared mappings (arena, mailboxes, trace areas) a worker hands its
// servers, and where they land.
//
// Zygote servers (sub children) map every share at the program's address: sub functions are
// program code and may hold pointers into the arena. That address must be free in the zygote,
// so the first zygote start reserves a range (PROT_NONE, lw__fs_shares_reserve) before it
// forks, and shares are placed inside it (lw__forkserver_share_map); the zygote never maps
// anything there. No range exists before the program first asks for a process.
//
// Helper servers (chip children) are fresh processes: they map each share wherever the kernel
// puts it and record the move (lw__fs_shares_note_local), so that lw__forkserver_local turns a
// program address from the children's envs into the address in this process.
//
// Thread safety: share_map/unmap take an internal mutex; the reservation is made under the
// zygote's mutex before any share exists in the zygote; the local table is written once, by
// the single-threaded server, before it forks children.
#ifndef LANEWORK_PARENT_FS_SHARES_H_
#define LANEWORK_PARENT_FS_SHARES_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Reserves the share range if there is none (at most an eighth of a finite RLIMIT_AS).
void lw__fs_shares_reserve(void);
// True when [addr, addr + len) lies in the reservation.
bool lw__fs_shares_reserved(uintptr_t addr, size_t len);
// In a newly forked zygote: drops the parent's shares (a fresh reservation over the range,
// shares mapped outside it unmapped), so no other worker's memory reaches its servers.
void lw__fs_shares_drop_inherited(void);
// In the atfork child handler: the mutex may have been held by another thread at the fork.
void lw__fs_shares_atfork_child(void);
size_t lw__fs_page_round(size_t bytes);

// In a helper server: share i of the program at program_addr is mapped at local_addr here.
void lw__fs_shares_note_local(uint32_t i, uintptr_t program_addr, uintptr_t local_addr,
                              size_t bytes);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_PARENT_FS_SHARES_H_
