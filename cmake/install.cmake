# Installing lockstep as a library (`cmake --install build --prefix PREFIX`) and packaging it as a .deb
# (`cmake --build build --target package`). Install components: `runtime` (the shared library and the
# programs), `development` (headers, the library's link name, CMake package and pkg-config files) and
# `python` (the Python package, python/CMakeLists.txt); the .deb holds all of them.
include(CMakePackageConfigHelpers)

# The shared library. Before 1.0 every minor release may change the ABI, so the SONAME carries the minor
# version (liblockstep.so.0.1); from 1.0 on, the major version alone.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(LOCKSTEP_SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  set(LOCKSTEP_COMPATIBILITY SameMinorVersion)
else()
  set(LOCKSTEP_SOVERSION ${PROJECT_VERSION_MAJOR})
  set(LOCKSTEP_COMPATIBILITY SameMajorVersion)
endif()
# oneDNN 3 (no Debian 12 package has it) is installed with the library, in a folder of its own
# (lib/lockstep/libdnnl.so.3) where it clashes with no other copy; the library finds it there (or beside
# itself, as in the wheel, setup.py), and finds CUDA's libraries where it found them at link time. The programs find the library in ../lib, so any prefix works
# without LD_LIBRARY_PATH.
set(LOCKSTEP_PRIVATE_LIBDIR ${CMAKE_INSTALL_LIBDIR}/lockstep)
set(lockstep_install_rpath "$ORIGIN/lockstep" "$ORIGIN")
if(LOCKSTEP_WITH_CUDA)
  get_filename_component(cudnn_dir ${CUDNN_LIBRARY} DIRECTORY)
  get_filename_component(nccl_dir ${NCCL_LIBRARY} DIRECTORY)
  list(APPEND lockstep_install_rpath ${CUDAToolkit_LIBRARY_DIR} ${cudnn_dir} ${nccl_dir})
  list(REMOVE_DUPLICATES lockstep_install_rpath)
endif()
set_target_properties(lockstep PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${LOCKSTEP_SOVERSION}
                                          INSTALL_RPATH "${lockstep_install_rpath}")
set_target_properties(lockstep_cli resnet50_trainer PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
install(TARGETS lockstep EXPORT lockstepTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT development)
get_target_property(dnnl_library DNNL::dnnl IMPORTED_LOCATION_RELEASE)
get_target_property(dnnl_soname DNNL::dnnl IMPORTED_SONAME_RELEASE)
install(FILES ${dnnl_library} DESTINATION ${LOCKSTEP_PRIVATE_LIBDIR} RENAME ${dnnl_soname} COMPONENT runtime)
install(TARGETS lockstep_cli resnet50_trainer RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)

# The public headers, at their paths under src/ (`#include "lockstep/model/layers.h"`): everything but the
# CUDA backend's headers, the operators' implementation headers (ops/ offers op_defs.h, the builders of
# operator definitions, and gradient_buckets.h, which data_parallel.h includes), the agent behind `lockstep
# launch` (launch/) and three internal helpers.
# Every installed header includes only installed headers, the standard library, protobuf and fmt
# (tests/install_test.sh checks it).
file(GLOB_RECURSE LOCKSTEP_PUBLIC_HEADERS RELATIVE ${PROJECT_SOURCE_DIR}/src CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/src/lockstep/*.h)
list(FILTER LOCKSTEP_PUBLIC_HEADERS EXCLUDE
     REGEX "/cuda/|^lockstep/ops/|^lockstep/launch/|^lockstep/comm/(gloo_message|redis_store).h$|^lockstep/core/caching_allocator.h$")
list(APPEND LOCKSTEP_PUBLIC_HEADERS lockstep/ops/op_defs.h lockstep/ops/gradient_buckets.h)
foreach(header ${LOCKSTEP_PUBLIC_HEADERS})
  get_filename_component(folder ${header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/src/${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${folder}
          COMPONENT development)
endforeach()
install(FILES ${PROTO_HDRS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT development)  # lockstep.pb.h

# find_package(lockstep) gives lockstep::lockstep; its config finds the public dependencies.
set(LOCKSTEP_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/lockstep)
install(EXPORT lockstepTargets NAMESPACE lockstep:: DESTINATION ${LOCKSTEP_CMAKE_DIR} COMPONENT development)
configure_package_config_file(cmake/lockstepConfig.cmake.in ${PROJECT_BINARY_DIR}/lockstepConfig.cmake
                              INSTALL_DESTINATION ${LOCKSTEP_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/lockstepConfigVersion.cmake
                                 COMPATIBILITY ${LOCKSTEP_COMPATIBILITY})
install(FILES ${PROJECT_BINARY_DIR}/lockstepConfig.cmake ${PROJECT_BINARY_DIR}/lockstepConfigVersion.cmake
        DESTINATION ${LOCKSTEP_CMAKE_DIR} COMPONENT development)

# pkg-config: the prefix is found from the .pc file's own folder, so the installed tree can be moved.
file(RELATIVE_PATH LOCKSTEP_PC_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" LOCKSTEP_PC_PREFIX "${LOCKSTEP_PC_PREFIX}")
configure_file(cmake/lockstep.pc.in ${PROJECT_BINARY_DIR}/lockstep.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/lockstep.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT development)

# The .deb: lockstep_<version>_<arch>.deb, or lockstep-cuda_... with the CUDA backend. Its dependencies are
# the Debian packages of the libraries it links, as dpkg-shlibdeps finds them; CUDA, cuDNN and NCCL come from
# /usr/local/cuda, which no Debian package provides (dpkg-shlibdeps refuses such libraries), so the CUDA
# variant lists the Debian ones itself.
set(LOCKSTEP_PACKAGE_MAINTAINER "lockstep maintainers <maintainers@lockstep.invalid>"
    CACHE STRING "The Maintainer field of the .deb")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "synchronous data-parallel training of neural networks in C++")
string(CONCAT CPACK_DEBIAN_PACKAGE_DESCRIPTION  # under the summary line
       "A Caffe2-style static graph with gradients as graph operators and oneDNN CPU kernels, trained on\n"
       "several devices and machines in step. Contains the lockstep and resnet50_trainer programs, the\n"
       "shared library, its headers, and CMake (find_package(lockstep)) and pkg-config files.")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${LOCKSTEP_PACKAGE_MAINTAINER})
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libprotobuf-dev, libfmt-dev")  # for building against the headers
set(CPACK_PACKAGE_NAME lockstep)
if(LOCKSTEP_WITH_CUDA)
  set(CPACK_PACKAGE_NAME lockstep-cuda)
  string(APPEND CPACK_DEBIAN_PACKAGE_DESCRIPTION
         "\nBuilt with the CUDA backend: it needs CUDA ${CUDAToolkit_VERSION}, cuDNN and NCCL in /usr/local/cuda.")
endif()
find_program(DPKG_SHLIBDEPS dpkg-shlibdeps)  # in dpkg-dev, which build-essential brings
if(DPKG_SHLIBDEPS AND NOT LOCKSTEP_WITH_CUDA)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  # The package's own oneDNN, which no other package provides
  # (dpkg-shlibdeps runs in the staging folder, hence the relative path).
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS .${CPACK_PACKAGING_INSTALL_PREFIX}/${LOCKSTEP_PRIVATE_LIBDIR})
else()  # what dpkg-shlibdeps finds for the CPU build on Debian 12
  string(CONCAT CPACK_DEBIAN_PACKAGE_DEPENDS
         "libc6, libstdc++6, libgcc-s1, libgomp1, libprotobuf32, libfmt9, libgloo0, libleveldb1d, "
         "liblmdb0, libturbojpeg0, libpng16-16, zlib1g, libonnx1")
endif()
include(CPack)
