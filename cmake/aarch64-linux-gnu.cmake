# cmake/aarch64-linux-gnu.cmake - cross-compiling for 64-bit ARM Linux with Debian's
# gcc-aarch64-linux-gnu (and libc6-dev-arm64-cross). Used for the edge runtime:
#   cmake -S edge -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
#   qemu-aarch64 -L /usr/aarch64-linux-gnu build-arm64/sqz-edge model.sqzb -p "Hello"
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
# binaries run under qemu-aarch64 find their loader and libc there
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
