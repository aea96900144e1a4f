# Sourced by the scripts: Open MPI settings for small machines and containers (root,
# more ranks than cores, ranks that yield instead of spinning, no CMA).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
export OMPI_MCA_rmaps_base_oversubscribe=1
export HDF5_USE_FILE_LOCKING=FALSE
# MPI-IO through ROMIO: Open MPI 4.1's OMPIO with its default collective-write component
# (fcoll vulcan) intermittently leaves cells of chunked HDF5 datasets unwritten.
export OMPI_MCA_io=${OMPI_MCA_io:-romio321}
TESSERA_MPIRUN=(mpirun --oversubscribe --bind-to none)
