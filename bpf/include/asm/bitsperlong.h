/* Arch-independent shim: the BPF target needs no arch headers (make generate works on any host). */
#include <asm-generic/bitsperlong.h>
