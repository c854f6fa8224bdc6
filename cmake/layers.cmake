# The library in layers: one object library per folder of src/lockstep, each compiled against its own headers
# and those of the layers below it only, all combined into the one shared liblockstep.
#
#   launch > train > parallel > model > ops > comm > data > cuda > core
#
# A layer's include path is build/layers/<layer> (holding lockstep/<layer>, a link to src/lockstep/<layer>)
# plus the paths of the layers below, so an upward `#include "lockstep/train/trainer.h"` in ops/ does not
# compile (tests/layer_check.sh shows it). Every .cc under a layer's folder belongs to it: adding a file needs
# no edit here. The CUDA backend's files are in folders named cuda/ (src/lockstep/cuda, ops/cuda, comm/cuda).
set(LOCKSTEP_LAYERS core cuda data comm ops model parallel train launch)

# What every layer compiles and links with: the generated headers (lockstep.pb.h, lockstep_git_commit.h) and the
# third-party libraries.
add_library(lockstep_layer_base INTERFACE)
target_include_directories(lockstep_layer_base INTERFACE ${CMAKE_CURRENT_BINARY_DIR} ${HIREDIS_INCLUDE_DIR})
target_compile_features(lockstep_layer_base INTERFACE cxx_std_17)
target_compile_options(lockstep_layer_base INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
target_compile_definitions(lockstep_layer_base INTERFACE LOCKSTEP_VERSION="${PROJECT_VERSION}")
target_link_libraries(lockstep_layer_base INTERFACE protobuf::libprotobuf Threads::Threads fmt::fmt gloo DNNL::dnnl
                      OpenMP::OpenMP_CXX ZLIB::ZLIB nlohmann_json::nlohmann_json leveldb::leveldb PkgConfig::LMDB
                      PkgConfig::TURBOJPEG PNG::PNG)
if(LOCKSTEP_WITH_CUDA)
  target_compile_definitions(lockstep_layer_base INTERFACE LOCKSTEP_WITH_CUDA=1)
  target_include_directories(lockstep_layer_base INTERFACE ${CUDNN_INCLUDE_DIR} ${NCCL_INCLUDE_DIR})
  target_link_libraries(lockstep_layer_base INTERFACE CUDA::cudart CUDA::cublas CUDA::curand ${CUDNN_LIBRARY}
                        ${NCCL_LIBRARY})
  target_compile_options(lockstep_layer_base INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
  # For the hint of a "no kernel image" error (only this file, so that changing them rebuilds one file).
  string(REPLACE ";" " " cuda_architectures_text "${CMAKE_CUDA_ARCHITECTURES}")
  set_source_files_properties(src/lockstep/cuda/cuda_context.cc PROPERTIES COMPILE_DEFINITIONS
                              "LOCKSTEP_CUDA_ARCHITECTURES=\"${cuda_architectures_text}\"")
endif()

set(below lockstep_layer_base)
set(LOCKSTEP_LAYER_TARGETS)
foreach(layer ${LOCKSTEP_LAYERS})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS src/lockstep/${layer}/*.cc)
  if(LOCKSTEP_WITH_CUDA)
    file(GLOB_RECURSE cuda_sources CONFIGURE_DEPENDS src/lockstep/${layer}/*.cu)
    list(APPEND sources ${cuda_sources})
  else()
    list(FILTER sources EXCLUDE REGEX "/cuda/")
  endif()
  list(APPEND sources ${LOCKSTEP_${layer}_GENERATED})
  if(NOT sources)
    continue()  # the CUDA backend's layer, without CUDA
  endif()
  add_library(lockstep_${layer} OBJECT ${sources})
  set_target_properties(lockstep_${layer} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/layers/${layer}/lockstep)
  file(CREATE_LINK ${CMAKE_CURRENT_SOURCE_DIR}/src/lockstep/${layer}
       ${CMAKE_CURRENT_BINARY_DIR}/layers/${layer}/lockstep/${layer} SYMBOLIC)
  target_include_directories(lockstep_${layer} PUBLIC ${CMAKE_CURRENT_BINARY_DIR}/layers/${layer})
  target_link_libraries(lockstep_${layer} PUBLIC ${below})
  set(below lockstep_${layer})
  list(APPEND LOCKSTEP_LAYER_TARGETS lockstep_${layer})

  # The layer check's probe: one file that tests/layer_check.sh writes and builds against this layer's path.
  set(probe ${CMAKE_CURRENT_BINARY_DIR}/layer_probes/${layer}.cc)
  if(NOT EXISTS ${probe})
    file(WRITE ${probe} "// written by tests/layer_check.sh\n")
  endif()
  add_library(layer_probe_${layer} OBJECT EXCLUDE_FROM_ALL ${probe})
  target_link_libraries(layer_probe_${layer} PRIVATE lockstep_${layer})
endforeach()
add_dependencies(lockstep_core lockstep_git_commit)
