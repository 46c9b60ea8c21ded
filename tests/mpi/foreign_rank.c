/* A rank of another tensortune build, for mpi_test.sh: it answers rank 0's
 * handshake as such a build would (another build identity) and leaves at
 * the next message, which is rank 0 refusing it. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char kInfo[] =
    "{\"format\":\"tensortune.graph\",\"nodes\":[{\"build_id\":\"tensortune 0.0.0 sources "
    "0000000000000000\",\"cores\":1,\"cpu\":\"c\",\"host\":\"elsewhere\",\"protocol_version\":%s,"
    "\"rank\":%d,\"type\":\"measure.RankInfo\"}],\"root\":0,\"version\":1}";

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (int message = 0; message < 2; ++message) {
    MPI_Status status;
    MPI_Probe(0, 1, MPI_COMM_WORLD, &status);
    int bytes = 0;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    char* data = malloc(bytes > 0 ? bytes : 1);
    MPI_Recv(data, bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (message == 0) {
      char reply[1024];
      memcpy(reply, data, 8); /* the request id */
      int n = snprintf(reply + 8, sizeof reply - 8, kInfo, argc > 1 ? argv[1] : "0", rank);
      MPI_Send(reply, 8 + n, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
    }
    free(data);
  }
  MPI_Finalize();
  return 0;
}
