# tessera_add_test(NAME LABELS serial|mpi [gpu ...] SOURCES ... [LINK libs] [RANKS 1 2 3 4 8]
#                  [TIMEOUT s] [ARGS ...])
# The label picks the launcher: `serial` builds on the plain Catch2 main and runs the
# binary once; `mpi` builds on the MPI Catch2 main (collective assertions) and registers
# one ctest entry per rank count under mpiexec. Every run has a TIMEOUT, so a hang fails
# instead of blocking CI.
set(TESSERA_MPIEXEC_FLAGS "")
set(TESSERA_MPI_TEST_ENV "OMP_NUM_THREADS=1")
if(TESSERA_MPI_IS_OPENMPI)
  # Root in containers, more ranks than cores, and yielding so polling ranks share cores.
  list(APPEND TESSERA_MPIEXEC_FLAGS --oversubscribe --bind-to none)
  list(APPEND TESSERA_MPI_TEST_ENV
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
    OMPI_MCA_rmaps_base_oversubscribe=1)
endif()

function(tessera_mpi_command out nranks)
  set(${out} ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${nranks} ${TESSERA_MPIEXEC_FLAGS}
    ${MPIEXEC_PREFLAGS} PARENT_SCOPE)
endfunction()

function(tessera_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;RANKS;LABELS;ARGS;LINK" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  if(NOT T_RANKS)
    set(T_RANKS 1 2 3 4 8)
  endif()
  if("serial" IN_LIST T_LABELS)
    add_executable(tessera_${name}_tests ${T_SOURCES})
    target_link_libraries(tessera_${name}_tests PRIVATE ${T_LINK} tessera_catch_main)
    add_test(NAME ${name} COMMAND tessera_${name}_tests ${T_ARGS})
    set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}")
  elseif("mpi" IN_LIST T_LABELS)
    add_executable(${name} ${T_SOURCES})
    target_link_libraries(${name} PRIVATE ${T_LINK} tessera_mpi_test_main)
    foreach(n IN LISTS T_RANKS)
      tessera_mpi_command(cmd ${n})
      add_test(NAME ${name}.np${n}
        COMMAND ${cmd} $<TARGET_FILE:${name}> ${MPIEXEC_POSTFLAGS} ${T_ARGS})
      set_tests_properties(${name}.np${n} PROPERTIES
        TIMEOUT ${T_TIMEOUT} PROCESSORS ${n} LABELS "${T_LABELS}"
        ENVIRONMENT "${TESSERA_MPI_TEST_ENV}")
    endforeach()
  else()
    message(FATAL_ERROR "tessera_add_test(${name}): LABELS needs serial or mpi (the launcher)")
  endif()
endfunction()

# tessera_add_mpi_variant(NAME TEST ENV VAR=VALUE... RANKS n... [TIMEOUT s] [ARGS ...])
# Runs the binary of mpi test TEST again under extra environment, as TEST.NAME.np<n>.
function(tessera_add_mpi_variant name)
  cmake_parse_arguments(V "" "TEST;TIMEOUT" "ENV;RANKS;ARGS" ${ARGN})
  if(NOT V_TIMEOUT)
    set(V_TIMEOUT 300)
  endif()
  foreach(n IN LISTS V_RANKS)
    tessera_mpi_command(cmd ${n})
    add_test(NAME ${V_TEST}.${name}.np${n}
      COMMAND ${cmd} $<TARGET_FILE:${V_TEST}> ${MPIEXEC_POSTFLAGS} ${V_ARGS})
    set_tests_properties(${V_TEST}.${name}.np${n} PROPERTIES
      TIMEOUT ${V_TIMEOUT} PROCESSORS ${n} LABELS "mpi"
      ENVIRONMENT "${TESSERA_MPI_TEST_ENV};${V_ENV}")
  endforeach()
endfunction()
