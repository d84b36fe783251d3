/*
 * chserve runs a current ClickHouse engine as a server for tests and the demo.
 *
 * The engine comes as a shared library (chDB's libchdb.so, from the npm package
 * @chdb/lib-linux-x64-gnu), whose one entry point runs clickhouse-local with the
 * given arguments. Since 26.x clickhouse-local serves the native protocol and HTTP
 * while a query runs, so scripts/clickhouse.sh passes a query that starts the
 * listeners and then sleeps: this process is the server until it is killed.
 *
 * Usage: chserve LIBCHDB ARG...   (ARGs are clickhouse-local's, no program name)
 *
 * Exits 1 with the engine's message when the query fails (for example a port in
 * use), 2 on a usage error.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The result of query_stable_v2, as chDB's header declares it. */
struct local_result_v2 {
	char *buf;
	size_t len;
	void *vec;
	double elapsed;
	uint64_t rows_read;
	uint64_t bytes_read;
	char *error_message;
};

typedef struct local_result_v2 *(*query_fn)(int argc, char **argv);

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s LIBCHDB ARG...\n", argv[0]);
		return 2;
	}
	void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		fprintf(stderr, "chserve: load %s: %s\n", argv[1], dlerror());
		return 1;
	}
	query_fn query = (query_fn)dlsym(lib, "query_stable_v2");
	if (query == NULL) {
		fprintf(stderr, "chserve: %s has no query_stable_v2: %s\n", argv[1], dlerror());
		return 1;
	}
	struct local_result_v2 *r = query(argc - 2, argv + 2);
	if (r == NULL) {
		fprintf(stderr, "chserve: the engine returned no result\n");
		return 1;
	}
	if (r->error_message != NULL) {
		fprintf(stderr, "chserve: %s\n", r->error_message);
		return 1;
	}
	fwrite(r->buf, 1, r->len, stdout);
	return 0;
}
