// Large buffers in 2 MB pages where the system offers them. Engine-internal.
//
// A fresh buffer costs a page fault per 4 kB page on its first write: on the 2-vCPU development VM, zeroing a
// new 170 MB buffer took 450 ms, nearly all of it in the kernel, against 13 ms for the same buffer in 2 MB
// pages (Linux's transparent huge pages, which Debian offers to buffers that ask: "madvise" mode). That is
// what a keystroke paid whenever the kept squares outgrew their padding, and what a first pass pays for what
// it keeps.
#pragma once

#include <cstddef>

namespace attnviz {

// Asks for 2 MB pages over the whole 2 MB pages inside [p, p + bytes), before anything is written there
// (pages already touched keep their size). Buffers under 4 MB, systems without transparent huge pages and
// WebAssembly: nothing. Only a hint: the contents and the address are unchanged. Costs to know: a buffer that
// malloc took from its heap (under glibc's mmap threshold, which grows to 32 MB) leaves the hint on that
// range after it is freed, so khugepaged may back sparsely used heap with whole 2 MB pages; and with the
// kernel's default defrag setting a fault in such a range may compact memory first, slower on a fragmented
// machine.
void prefer_huge_pages(const void* p, std::size_t bytes);

}  // namespace attnviz
