# Cross build for ARM64 Linux with Debian's g++-aarch64-linux-gnu; the tests run under qemu-user. Libraries come
# from Debian's arm64 multiarch packages (libpcre2-dev:arm64, libutf8proc-dev:arm64, libstdc++6:arm64, installed
# by scripts/install-deps --arm64) in /usr/lib/aarch64-linux-gnu; the header-only ones (xsimd, doctest,
# nlohmann) are the host's /usr/include, which holds for every architecture.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# ctest and doctest's test discovery run the test binary through qemu, on the multiarch arm64 runtime
# (/lib/ld-linux-aarch64.so.1 and /usr/lib/aarch64-linux-gnu, the host's glibc version). Not with
# `-L /usr/aarch64-linux-gnu`: that takes the cross toolchain's dynamic loader, which then loads the multiarch
# libc.so.6 beside it (PCRE2's dependency), a different glibc build, and threads hang in pthread_create.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)

# pkg-config answers for arm64: only the multiarch .pc files, never the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
