// gen_blob: writes the data that big_vector_add embeds. Usage: gen_blob OUT BYTES
//
// The bytes come from a fixed-seed xorshift generator, kept to 6 bits of entropy each: far too
// random for LZ matches, yet Huffman coding still shrinks them by about a quarter, so a packed
// image really has to be decompressed at register.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: gen_blob OUT BYTES\n");
    return 2;
  }
  char *end = NULL;
  unsigned long long n = strtoull(argv[2], &end, 10);
  if (end == argv[2] || *end != '\0' || n == 0 || n > (1ull << 30)) {
    fprintf(stderr, "gen_blob: bad size '%s'\n", argv[2]);
    return 2;
  }
  FILE *f = fopen(argv[1], "wb");
  if (f == NULL) {
    perror(argv[1]);
    return 1;
  }
  uint64_t x = 0x9E3779B97F4A7C15ull;
  unsigned char buf[4096];
  for (unsigned long long done = 0; done < n;) {
    size_t chunk = n - done < sizeof buf ? (size_t)(n - done) : sizeof buf;
    for (size_t i = 0; i < chunk; i++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      buf[i] = (unsigned char)(0x20 + (x >> 58));
    }
    if (fwrite(buf, 1, chunk, f) != chunk) {
      perror(argv[1]);
      fclose(f);
      return 1;
    }
    done += chunk;
  }
  if (fclose(f) != 0) {
    perror(argv[1]);
    return 1;
  }
  return 0;
}
