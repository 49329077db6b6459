"""The DDP script (train_ddp.py) as a job with SageMaker's `mpi` distribution runs it: mpirun starts
the processes, the script takes torch.distributed's variables from Open MPI's (rank, size, local
rank) and MASTER_ADDR/MASTER_PORT from the platform's environment."""
import os

os.environ.setdefault("RANK", os.environ["OMPI_COMM_WORLD_RANK"])
os.environ.setdefault("WORLD_SIZE", os.environ["OMPI_COMM_WORLD_SIZE"])
os.environ.setdefault("LOCAL_RANK", os.environ["OMPI_COMM_WORLD_LOCAL_RANK"])

from train_ddp import main  # noqa: E402

if __name__ == "__main__":
    main()
