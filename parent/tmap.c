// parent/tmap.c — the tensor map: buffer address -> last writer + readers since that write,
// with scopes. The contract is in parent/tmap.h.
#include "parent/tmap.h"

#include <stdlib.h>
#include <string.h>

#define TMAP_INLINE_READERS 4

typedef struct tmap_node {
  uintptr_t key;
  bool has_writer;            // some task since the last clear wrote the buffer
  lw_tmap_ref_t writer;
  // Readers since the last write (the write-after-read edges of the next writer). The first
  // few live in the node itself, so a buffer read by one or two tasks costs no allocation.
  lw_tmap_ref_t *readers;
  uint32_t n_readers, cap_readers;
  lw_tmap_ref_t inline_readers[TMAP_INLINE_READERS];
  struct tmap_node *next;
} tmap_node_t;

struct lw_tmap {
  tmap_node_t **buckets;
  uint32_t n_buckets;
  uint32_t n;
  uint32_t depth;  // open scopes
  // Per depth, the keys first written at that depth (forgotten when its scope ends). Depth 0
  // is outside every scope and never used.
  uintptr_t *scope_keys[LW_TMAP_MAX_SCOPES + 1];
  uint32_t n_scope_keys[LW_TMAP_MAX_SCOPES + 1];
  uint32_t cap_scope_keys[LW_TMAP_MAX_SCOPES + 1];
  lw_tmap_live_fn live;
  void *live_ctx;
  lw_tmap_alloc_gate_fn alloc_gate;
  void *alloc_gate_ctx;
};

// Every allocation asks the gate first, so tests can fail each one in turn.
static bool may_alloc(const lw_tmap_t *m) {
  return !m->alloc_gate || m->alloc_gate(m->alloc_gate_ctx);
}

static uint32_t tmap_hash(uintptr_t k, uint32_t n) {
  uint64_t x = (uint64_t)k * 0x9e3779b97f4a7c15ull;
  return (uint32_t)(x >> 32) & (n - 1);
}

lw_status_t lw__tmap_create(const lw_tmap_options_t *options, lw_tmap_t **out) {
  *out = NULL;
  if (!options || !options->live) return LW_INVALID_ARGUMENT;
  uint32_t nb = options->initial_buckets ? options->initial_buckets : LW_TMAP_DEFAULT_BUCKETS;
  if ((nb & (nb - 1)) != 0) return LW_INVALID_ARGUMENT;
  if (options->alloc_gate && !options->alloc_gate(options->alloc_gate_ctx)) {
    return LW_RESOURCE_EXHAUSTED;
  }
  lw_tmap_t *m = calloc(1, sizeof(*m));
  if (!m) return LW_RESOURCE_EXHAUSTED;
  m->live = options->live;
  m->live_ctx = options->live_ctx;
  m->alloc_gate = options->alloc_gate;
  m->alloc_gate_ctx = options->alloc_gate_ctx;
  m->n_buckets = nb;
  m->buckets = may_alloc(m) ? calloc(nb, sizeof(tmap_node_t *)) : NULL;
  if (!m->buckets) {
    lw__tmap_destroy(m);
    return LW_RESOURCE_EXHAUSTED;
  }
  *out = m;
  return LW_OK;
}

static void tmap_node_free(tmap_node_t *n) {
  if (n->readers != n->inline_readers) free(n->readers);
  free(n);
}

void lw__tmap_clear(lw_tmap_t *m) {
  if (m->n > 0) {
    for (uint32_t i = 0; i < m->n_buckets; ++i) {
      tmap_node_t *n = m->buckets[i];
      while (n) {
        tmap_node_t *next = n->next;
        tmap_node_free(n);
        n = next;
      }
      m->buckets[i] = NULL;
    }
  }
  m->n = 0;
  m->depth = 0;
  for (uint32_t d = 0; d <= LW_TMAP_MAX_SCOPES; ++d) m->n_scope_keys[d] = 0;
}

// Accepts a half-built map (buckets NULL, see lw__tmap_create).
void lw__tmap_destroy(lw_tmap_t *m) {
  if (!m) return;
  if (m->buckets) lw__tmap_clear(m);
  for (uint32_t d = 0; d <= LW_TMAP_MAX_SCOPES; ++d) free(m->scope_keys[d]);
  free(m->buckets);
  free(m);
}

static tmap_node_t *tmap_find(const lw_tmap_t *m, uintptr_t key) {
  for (tmap_node_t *n = m->buckets[tmap_hash(key, m->n_buckets)]; n; n = n->next) {
    if (n->key == key) return n;
  }
  return NULL;
}

static void tmap_grow(lw_tmap_t *m) {
  uint32_t nb = m->n_buckets * 2;
  tmap_node_t **b = may_alloc(m) ? calloc(nb, sizeof(tmap_node_t *)) : NULL;
  if (!b) return;  // keep the longer chains; correctness does not depend on the size
  for (uint32_t i = 0; i < m->n_buckets; ++i) {
    tmap_node_t *n = m->buckets[i];
    while (n) {
      tmap_node_t *next = n->next;
      uint32_t h = tmap_hash(n->key, nb);
      n->next = b[h];
      b[h] = n;
      n = next;
    }
  }
  free(m->buckets);
  m->buckets = b;
  m->n_buckets = nb;
}

// The entry for key, created empty (no writer, no readers) when there is none.
static tmap_node_t *tmap_get(lw_tmap_t *m, uintptr_t key) {
  tmap_node_t *n = tmap_find(m, key);
  if (n) return n;
  n = may_alloc(m) ? malloc(sizeof(*n)) : NULL;
  if (!n) return NULL;
  if (m->n >= 2 * m->n_buckets) tmap_grow(m);
  uint32_t h = tmap_hash(key, m->n_buckets);
  n->key = key;
  n->has_writer = false;
  n->writer = (lw_tmap_ref_t){0, 0};
  n->readers = n->inline_readers;
  n->n_readers = 0;
  n->cap_readers = TMAP_INLINE_READERS;
  n->next = m->buckets[h];
  m->buckets[h] = n;
  m->n++;
  return n;
}

static void tmap_remove(lw_tmap_t *m, uintptr_t key) {
  tmap_node_t **pp = &m->buckets[tmap_hash(key, m->n_buckets)];
  for (; *pp; pp = &(*pp)->next) {
    if ((*pp)->key == key) {
      tmap_node_t *n = *pp;
      *pp = n->next;
      tmap_node_free(n);
      m->n--;
      return;
    }
  }
}

static bool ref_eq(lw_tmap_ref_t a, lw_tmap_ref_t b) {
  return a.index == b.index && a.gen == b.gen;
}

// Appends me to the readers of n. A full list first drops its finished readers, so it holds
// at most about twice the readers still alive, however many tasks read the buffer.
static bool tmap_add_reader(lw_tmap_t *m, tmap_node_t *n, lw_tmap_ref_t me) {
  if (n->n_readers > 0 && ref_eq(n->readers[n->n_readers - 1], me)) {
    return true;  // the same task reads the buffer through two tensors
  }
  if (n->n_readers == n->cap_readers) {
    uint32_t kept = 0;
    for (uint32_t i = 0; i < n->n_readers; ++i) {
      if (m->live(m->live_ctx, n->readers[i])) n->readers[kept++] = n->readers[i];
    }
    n->n_readers = kept;
  }
  if (n->n_readers == n->cap_readers) {
    uint32_t cap = n->cap_readers * 2;
    lw_tmap_ref_t *r = NULL;
    if (may_alloc(m)) {
      if (n->readers == n->inline_readers) {
        r = malloc(cap * sizeof(*r));
        if (r) memcpy(r, n->inline_readers, sizeof(n->inline_readers));
      } else {
        r = realloc(n->readers, cap * sizeof(*r));
      }
    }
    if (!r) return false;
    n->readers = r;
    n->cap_readers = cap;
  }
  n->readers[n->n_readers++] = me;
  return true;
}

// Remembers that key was first written at the current depth, so its scope's end forgets it.
static bool tmap_note_scope_key(lw_tmap_t *m, uintptr_t key) {
  uint32_t d = m->depth;
  if (m->n_scope_keys[d] == m->cap_scope_keys[d]) {
    uint32_t cap = m->cap_scope_keys[d] ? m->cap_scope_keys[d] * 2 : 64;
    uintptr_t *k = may_alloc(m) ? realloc(m->scope_keys[d], cap * sizeof(uintptr_t)) : NULL;
    if (!k) return false;
    m->scope_keys[d] = k;
    m->cap_scope_keys[d] = cap;
  }
  m->scope_keys[d][m->n_scope_keys[d]++] = key;
  return true;
}

lw_status_t lw__tmap_use(lw_tmap_t *m, uintptr_t key, lw_tag_t tag, lw_tmap_ref_t task,
                         lw_tmap_edge_fn edge, void *edge_ctx) {
  if (key == 0 || tag == LW_TAG_NO_DEP) return LW_OK;
  tmap_node_t *n = tmap_get(m, key);
  if (!n) return LW_RESOURCE_EXHAUSTED;
  if (n->has_writer && m->live(m->live_ctx, n->writer)) {
    LW_RETURN_IF_ERROR(edge(edge_ctx, n->writer));
  }
  if (tag == LW_TAG_INPUT) return tmap_add_reader(m, n, task) ? LW_OK : LW_RESOURCE_EXHAUSTED;
  for (uint32_t i = 0; i < n->n_readers; ++i) {
    if (m->live(m->live_ctx, n->readers[i])) LW_RETURN_IF_ERROR(edge(edge_ctx, n->readers[i]));
  }
  // First written inside the current scope: forgotten when it ends.
  if (!n->has_writer && m->depth > 0 && !tmap_note_scope_key(m, key)) {
    return LW_RESOURCE_EXHAUSTED;
  }
  n->has_writer = true;
  n->writer = task;
  n->n_readers = 0;
  return LW_OK;
}

bool lw__tmap_scope_begin(lw_tmap_t *m) {
  if (m->depth == LW_TMAP_MAX_SCOPES) return false;
  m->depth++;
  m->n_scope_keys[m->depth] = 0;
  return true;
}

bool lw__tmap_scope_end(lw_tmap_t *m) {
  if (m->depth == 0) return false;
  uint32_t d = m->depth;
  for (uint32_t i = 0; i < m->n_scope_keys[d]; ++i) tmap_remove(m, m->scope_keys[d][i]);
  m->n_scope_keys[d] = 0;
  m->depth--;
  return true;
}

uint32_t lw__tmap_depth(const lw_tmap_t *m) { return m->depth; }

bool lw__tmap_lookup(const lw_tmap_t *m, uintptr_t key, lw_tmap_entry_info_t *out_info) {
  const tmap_node_t *n = tmap_find(m, key);
  if (!n) return false;
  *out_info = (lw_tmap_entry_info_t){n->has_writer, n->writer, n->n_readers, n->cap_readers};
  return true;
}

uint32_t lw__tmap_count(const lw_tmap_t *m) { return m->n; }

uint32_t lw__tmap_bucket_count(const lw_tmap_t *m) { return m->n_buckets; }
