/*
 * rxe-verbs: a verbs agent for the rxe lab VM. It connects over TCP to HOST:PORT (our side of the lab, over the
 * link's management path), then runs one verbs call per line it reads and answers each with one line:
 * "ok key=value ..." or "err what". So a test on our side can make rxe do any verb sequence (memory windows,
 * Local Invalidate, SEND_WITH_INV, ...) that the stock tools cannot, and check what rxe reports.
 *
 * usage: rxe-verbs HOST PORT GID_INDEX
 *
 * Commands (numbers decimal; GIDs 32 hex digits; access letters: w remote write, r remote read, a remote atomic,
 * b MW bind; local write is always on):
 *   open                              device rxe0, a PD and a CQ (once), and a new RC QP in INIT, which the
 *                                     commands after it use                             -> qpn gid
 *   connect DQPN DPSN SQPSN DGID MTU  RTR (MTU as the ibv_mtu enum) and RTS, timeout 18  -> ok
 *   mr LEN ACCESS                     a zeroed buffer registered                        -> id addr lkey rkey
 *   mw TYPE                           ibv_alloc_mw type 1 or 2                          -> id rkey
 *   bind MW MR OFF LEN ACCESS         type 1: ibv_bind_mw; type 2: an IBV_WR_BIND_MW    -> rkey (the window's)
 *   inv RKEY                          an IBV_WR_LOCAL_INV                               -> status
 *   send_inv MR OFF LEN RKEY          an IBV_WR_SEND_WITH_INV                           -> status
 *   write MR OFF LEN RADDR RKEY       an IBV_WR_RDMA_WRITE from the buffer to RADDR      -> status
 *   read MR OFF LEN RADDR RKEY        an IBV_WR_RDMA_READ from RADDR into the buffer     -> status
 *   recv MR OFF LEN                   a receive posted                                  -> ok
 *   poll                              the next completion                               -> status opcode flags byte_len ex
 *                                     (ex: the WC's imm_data / invalidated_rkey union, as delivered)
 *   peek MR OFF LEN                   the buffer's bytes                                -> hex
 *   poke MR OFF HEX                   write the buffer                                  -> ok
 *   quit                              -> ok, then exit 0
 * A completion that fails is still "ok status=N" (the test decides); a call that fails is "err".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_OBJ 32

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct ibv_mr *mrs[MAX_OBJ];
static int n_mr;
static struct ibv_mw *mws[MAX_OBJ];
static int n_mw;
static int gid_index;
static FILE *out;

static int access_of(const char *s)
{
	int a = IBV_ACCESS_LOCAL_WRITE;
	if (strchr(s, 'w'))
		a |= IBV_ACCESS_REMOTE_WRITE;
	if (strchr(s, 'r'))
		a |= IBV_ACCESS_REMOTE_READ;
	if (strchr(s, 'a'))
		a |= IBV_ACCESS_REMOTE_ATOMIC;
	if (strchr(s, 'b'))
		a |= IBV_ACCESS_MW_BIND;
	return a;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* the next completion, waiting up to 30 s (the RNIC on our side is a simulation) */
static int wait_wc(struct ibv_wc *wc)
{
	double end = now() + 30;
	while (now() < end) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			return -1;
		if (n == 1)
			return 0;
		usleep(100);
	}
	return -1;
}

static void hex_of(const unsigned char *b, size_t n, char *s)
{
	for (size_t i = 0; i < n; i++)
		sprintf(s + 2 * i, "%02x", b[i]);
	s[2 * n] = 0;
}

static int gid_of(const char *s, union ibv_gid *g)
{
	if (strlen(s) != 32)
		return -1;
	for (int i = 0; i < 16; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		g->raw[i] = v;
	}
	return 0;
}

static struct ibv_mr *mr_at(int id)
{
	return id >= 0 && id < n_mr ? mrs[id] : NULL;
}

/* post one send WR and wait for its completion; its status, or -1 */
static int post_and_wait(struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	if (ibv_post_send(qp, wr, &bad))
		return -1;
	if (wait_wc(&wc))
		return -1;
	return wc.status;
}

static void run(char *line)
{
	char *cmd = strtok(line, " \r\n");
	if (!cmd)
		return;
	if (!strcmp(cmd, "open")) {
		if (!ctx) {
			struct ibv_device **l = ibv_get_device_list(NULL);
			if (!l || !l[0]) {
				fprintf(out, "err no RDMA device\n");
				return;
			}
			ctx = ibv_open_device(l[0]);
			pd = ctx ? ibv_alloc_pd(ctx) : NULL;
			cq = pd ? ibv_create_cq(ctx, 64, NULL, NULL, 0) : NULL;
		}
		struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1}};
		qp = cq ? ibv_create_qp(pd, &ia) : NULL;
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .pkey_index = 0,
			.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC};
		union ibv_gid g;
		char gs[33];
		if (!qp || ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ||
		    ibv_query_gid(ctx, 1, gid_index, &g)) {
			fprintf(out, "err open: %s\n", strerror(errno));
			return;
		}
		hex_of(g.raw, 16, gs);
		fprintf(out, "ok qpn=%u gid=%s\n", qp->qp_num, gs);
	} else if (!strcmp(cmd, "connect")) {
		unsigned dqpn, dpsn, sqpsn, mtu;
		char *s[5];
		for (int i = 0; i < 5; i++)
			s[i] = strtok(NULL, " \r\n");
		union ibv_gid dgid;
		if (!s[4] || sscanf(s[0], "%u", &dqpn) != 1 || sscanf(s[1], "%u", &dpsn) != 1 ||
		    sscanf(s[2], "%u", &sqpsn) != 1 || gid_of(s[3], &dgid) || sscanf(s[4], "%u", &mtu) != 1) {
			fprintf(out, "err connect DQPN DPSN SQPSN DGID MTU\n");
			return;
		}
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR, .path_mtu = mtu, .dest_qp_num = dqpn, .rq_psn = dpsn,
			.max_dest_rd_atomic = 16, .min_rnr_timer = 12,
			.ah_attr = {.is_global = 1, .port_num = 1,
				.grh = {.dgid = dgid, .sgid_index = gid_index, .hop_limit = 64}}};
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
			fprintf(out, "err RTR: %s\n", strerror(errno));
			return;
		}
		struct ibv_qp_attr r = {.qp_state = IBV_QPS_RTS, .sq_psn = sqpsn, .timeout = 18, .retry_cnt = 7,
			.rnr_retry = 7, .max_rd_atomic = 16};
		if (ibv_modify_qp(qp, &r, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)) {
			fprintf(out, "err RTS: %s\n", strerror(errno));
			return;
		}
		fprintf(out, "ok\n");
	} else if (!strcmp(cmd, "mr")) {
		char *l = strtok(NULL, " \r\n"), *acc = strtok(NULL, " \r\n");
		size_t len = l ? strtoul(l, NULL, 10) : 0;
		void *b = NULL;
		if (!acc || !len || n_mr == MAX_OBJ || posix_memalign(&b, 4096, len)) {
			fprintf(out, "err mr LEN ACCESS\n");
			return;
		}
		memset(b, 0, len);
		struct ibv_mr *m = ibv_reg_mr(pd, b, len, access_of(acc));
		if (!m) {
			fprintf(out, "err reg_mr: %s\n", strerror(errno));
			return;
		}
		mrs[n_mr] = m;
		fprintf(out, "ok id=%d addr=%llu lkey=%u rkey=%u\n", n_mr++, (unsigned long long)(uintptr_t)b, m->lkey,
			m->rkey);
	} else if (!strcmp(cmd, "mw")) {
		char *t = strtok(NULL, " \r\n");
		struct ibv_mw *w = NULL;
		if (t && n_mw < MAX_OBJ)
			w = ibv_alloc_mw(pd, !strcmp(t, "1") ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2);
		if (!w) {
			fprintf(out, "err alloc_mw: %s\n", strerror(errno));
			return;
		}
		mws[n_mw] = w;
		fprintf(out, "ok id=%d rkey=%u\n", n_mw++, w->rkey);
	} else if (!strcmp(cmd, "bind")) {
		char *s[5];
		for (int i = 0; i < 5; i++)
			s[i] = strtok(NULL, " \r\n");
		int wi = s[0] ? atoi(s[0]) : -1;
		struct ibv_mr *m = s[1] ? mr_at(atoi(s[1])) : NULL;
		if (!s[4] || wi < 0 || wi >= n_mw || !m) {
			fprintf(out, "err bind MW MR OFF LEN ACCESS\n");
			return;
		}
		struct ibv_mw *w = mws[wi];
		struct ibv_mw_bind_info bi = {.mr = m, .addr = (uintptr_t)m->addr + strtoull(s[2], NULL, 10),
			.length = strtoull(s[3], NULL, 10), .mw_access_flags = access_of(s[4]) & ~IBV_ACCESS_LOCAL_WRITE};
		int st;
		uint32_t rkey;
		if (w->type == IBV_MW_TYPE_1) {
			struct ibv_mw_bind b = {.wr_id = 1, .send_flags = IBV_SEND_SIGNALED, .bind_info = bi};
			struct ibv_wc wc;
			if (ibv_bind_mw(qp, w, &b) || wait_wc(&wc)) {
				fprintf(out, "err bind_mw: %s\n", strerror(errno));
				return;
			}
			st = wc.status;
			rkey = w->rkey;
		} else {
			rkey = ibv_inc_rkey(w->rkey);
			struct ibv_send_wr wr = {.wr_id = 2, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED,
				.bind_mw = {.mw = w, .rkey = rkey, .bind_info = bi}};
			st = post_and_wait(&wr);
			if (st == IBV_WC_SUCCESS)
				w->rkey = rkey;
		}
		if (st < 0)
			fprintf(out, "err bind: %s\n", strerror(errno));
		else
			fprintf(out, "ok status=%d rkey=%u\n", st, rkey);
	} else if (!strcmp(cmd, "inv")) {
		char *k = strtok(NULL, " \r\n");
		struct ibv_send_wr wr = {.wr_id = 3, .opcode = IBV_WR_LOCAL_INV, .send_flags = IBV_SEND_SIGNALED,
			.invalidate_rkey = k ? strtoul(k, NULL, 10) : 0};
		int st = post_and_wait(&wr);
		if (st < 0)
			fprintf(out, "err local_inv: %s\n", strerror(errno));
		else
			fprintf(out, "ok status=%d\n", st);
	} else if (!strcmp(cmd, "send_inv") || !strcmp(cmd, "recv")) {
		int send = !strcmp(cmd, "send_inv");
		char *s[4];
		for (int i = 0; i < 4; i++)
			s[i] = strtok(NULL, " \r\n");
		struct ibv_mr *m = s[0] ? mr_at(atoi(s[0])) : NULL;
		if (!m || !s[2] || (send && !s[3])) {
			fprintf(out, "err %s MR OFF LEN%s\n", cmd, send ? " RKEY" : "");
			return;
		}
		struct ibv_sge sge = {.addr = (uintptr_t)m->addr + strtoull(s[1], NULL, 10),
			.length = strtoul(s[2], NULL, 10), .lkey = m->lkey};
		if (send) {
			struct ibv_send_wr wr = {.wr_id = 4, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_INV,
				.send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = strtoul(s[3], NULL, 10)};
			int st = post_and_wait(&wr);
			if (st < 0)
				fprintf(out, "err send_inv: %s\n", strerror(errno));
			else
				fprintf(out, "ok status=%d\n", st);
		} else {
			struct ibv_recv_wr wr = {.wr_id = 5, .sg_list = &sge, .num_sge = 1}, *bad;
			if (ibv_post_recv(qp, &wr, &bad))
				fprintf(out, "err post_recv: %s\n", strerror(errno));
			else
				fprintf(out, "ok\n");
		}
	} else if (!strcmp(cmd, "write") || !strcmp(cmd, "read")) {
		char *s[5];
		for (int i = 0; i < 5; i++)
			s[i] = strtok(NULL, " \r\n");
		struct ibv_mr *m = s[0] ? mr_at(atoi(s[0])) : NULL;
		if (!m || !s[4]) {
			fprintf(out, "err %s MR OFF LEN RADDR RKEY\n", cmd);
			return;
		}
		struct ibv_sge sge = {.addr = (uintptr_t)m->addr + strtoull(s[1], NULL, 10),
			.length = strtoul(s[2], NULL, 10), .lkey = m->lkey};
		struct ibv_send_wr wr = {.wr_id = 6, .sg_list = &sge, .num_sge = 1,
			.opcode = !strcmp(cmd, "read") ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED};
		wr.wr.rdma.remote_addr = strtoull(s[3], NULL, 10);
		wr.wr.rdma.rkey = strtoul(s[4], NULL, 10);
		int st = post_and_wait(&wr);
		if (st < 0)
			fprintf(out, "err %s: %s\n", cmd, strerror(errno));
		else
			fprintf(out, "ok status=%d\n", st);
	} else if (!strcmp(cmd, "poll")) {
		struct ibv_wc wc;
		if (wait_wc(&wc))
			fprintf(out, "err no completion\n");
		else
			fprintf(out, "ok status=%d opcode=%d flags=%u byte_len=%u ex=%u\n", wc.status, wc.opcode,
				wc.wc_flags, wc.byte_len, wc.invalidated_rkey);
	} else if (!strcmp(cmd, "peek") || !strcmp(cmd, "poke")) {
		char *s[3];
		for (int i = 0; i < 3; i++)
			s[i] = strtok(NULL, " \r\n");
		struct ibv_mr *m = s[0] ? mr_at(atoi(s[0])) : NULL;
		size_t off = s[1] ? strtoull(s[1], NULL, 10) : 0;
		size_t len = !s[2] ? 0 : !strcmp(cmd, "peek") ? strtoull(s[2], NULL, 10) : strlen(s[2]) / 2;
		if (!m || !len || len > 4096 || off + len > m->length) {
			fprintf(out, "err %s MR OFF %s\n", cmd, !strcmp(cmd, "peek") ? "LEN" : "HEX");
			return;
		}
		unsigned char *b = (unsigned char *)m->addr + off;
		if (!strcmp(cmd, "peek")) {
			char *h = malloc(2 * len + 1);
			hex_of(b, len, h);
			fprintf(out, "ok hex=%s\n", h);
			free(h);
		} else {
			for (size_t i = 0; i < len; i++) {
				unsigned v;
				sscanf(s[2] + 2 * i, "%2x", &v);
				b[i] = v;
			}
			fprintf(out, "ok\n");
		}
	} else if (!strcmp(cmd, "quit")) {
		fprintf(out, "ok\n");
		fflush(out);
		exit(0);
	} else {
		fprintf(out, "err unknown command %s\n", cmd);
	}
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: rxe-verbs HOST PORT GID_INDEX\n");
		return 2;
	}
	gid_index = atoi(argv[3]);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
	if (inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) {
		fprintf(stderr, "rxe-verbs: bad address %s\n", argv[1]);
		return 2;
	}
	int fd = -1;
	/* our side may not listen yet: try for 60 s */
	for (int i = 0; i < 600; i++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (!connect(fd, (struct sockaddr *)&sa, sizeof sa))
			break;
		close(fd);
		fd = -1;
		usleep(100000);
	}
	if (fd < 0) {
		fprintf(stderr, "rxe-verbs: cannot connect to %s:%s\n", argv[1], argv[2]);
		return 1;
	}
	FILE *in = fdopen(fd, "r");
	out = fdopen(dup(fd), "w");
	char line[8192];
	while (fgets(line, sizeof line, in)) {
		fprintf(stderr, "rxe-verbs: %s", line);
		run(line);
		fflush(out);
	}
	return 0;
}
