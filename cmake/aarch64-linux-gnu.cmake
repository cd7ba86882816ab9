# Cross-build for 64-bit Arm with Debian's cross toolchain (crossbuild-essential-arm64) against
# the arm64 -dev packages installed through multiarch (`tools/setup.sh --arm64`); the `arm64`
# preset uses it. Executables, ctest's included, run under qemu user emulation
# (qemu-user-static) invoked explicitly, so no binfmt registration is needed.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Only the arm64 .pc files (multiarch keeps them in /usr/lib/aarch64-linux-gnu/pkgconfig).
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
# No -L sysroot: multiarch installs the arm64 loader and libraries at their native paths
# (/lib/ld-linux-aarch64.so.1, /lib/aarch64-linux-gnu), where qemu finds them. The cross
# toolchain's own copies in /usr/aarch64-linux-gnu are an older glibc build: mixing its loader
# with multiarch's libc hangs the first pthread_create. The emulated CPU comes from QEMU_CPU
# (set by the arm64 test preset and per test), so one emulator serves NEON and SVE runs.
set(CMAKE_CROSSCOMPILING_EMULATOR /usr/bin/qemu-aarch64-static)
