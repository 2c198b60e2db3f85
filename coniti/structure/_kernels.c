/* coniti.structure._kernels: the exact scoring of coniti/structure/scoring.py and the candidate
 * step of SortedRows.top_of_slice (coniti/structure/rows.py), compiled.
 *
 * Optional: every function here has a numpy twin that gives the same results bit for bit, and the
 * package falls back to it when this module was not built (tests/test_kernels.py compares them).
 *
 * The canonical score of a row is the correctly rounded sum of the exact float64 products of its
 * float32 values with the float32 query: what math.fsum of them gives. Each product of two float32
 * values is exact in float64, and so is its scaling by 2**50 (p). (p + 1.5 * 2**52) - 1.5 * 2**52
 * rounds |p| <= 2**51 to an integer t, and f = p - t (|f| <= 1/2) is exact. While the row's
 * sum |t| stays below 2**52, float64 adds the t exactly in any order (H); the f's float64 sum F is
 * off their exact sum by at most SLACK (any order). When the interval [H + F - SLACK, H + F + SLACK]
 * holds no rounding boundary of x = fl(H + F) (one two-sum gives H + F's error exactly), x * 2**-50
 * is the correctly rounded total. Where it may, F is itself exact when every f is a multiple of
 * 2**-m with dim * 2**m <= 2**53; then x is the correct (half-even) rounding of the exact total.
 * Rows left (zero totals, whose sign fsum decides; products with bits below 2**-m; NaN or infinite
 * values; a row norm times the query's near 2 or more, which could take a product or sum |t| past
 * those bounds) are named to the caller, which sums them with math.fsum.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "the exact split needs float64 arithmetic evaluated in float64 (FLT_EVAL_METHOD 0)"
#endif

#define SCALE 1125899906842624.0   /* 2**50 */
#define UNSCALE (1.0 / SCALE)      /* 2**-50 */
#define ROUNDER 6755399441055744.0 /* 1.5 * 2**52 */
#define TWO51 2251799813685248.0
#define TWO52 4503599627370496.0
#define MAX_DIM (1 << 20) /* scoring.py's _EXACT_DIM: beyond, rows are left to fsum */

/* Four lanes of float32 and float64 (GCC and clang vector extensions: SIMD where the target has it,
 * pairs or scalars elsewhere, with IEEE semantics either way). */
typedef float v4f __attribute__((vector_size(16)));
typedef double v4d __attribute__((vector_size(32)));

/* What one row's pass gives: the integer parts' sum H, the fractions' sum F and the row's sum of
 * squares (each square exact, their float64 sum within a factor 1 + dim * 2**-53 of the truth). */
typedef struct {
    double high, fraction, squares;
} RowSums;

static RowSums row_sums(const float *row, const double *scaled, Py_ssize_t dim)
{
    const v4d rounder = {ROUNDER, ROUNDER, ROUNDER, ROUNDER};
    v4d h = {0.0, 0.0, 0.0, 0.0}, f = h, q = h;
    Py_ssize_t j = 0;
    for (; j + 4 <= dim; j += 4) { /* four independent sums: any order is as good */
        v4f r4;
        v4d scaled4;
        memcpy(&r4, row + j, sizeof r4); /* unaligned loads */
        memcpy(&scaled4, scaled + j, sizeof scaled4);
        v4d r = __builtin_convertvector(r4, v4d);
        v4d p = r * scaled4;               /* exact */
        v4d t = (p + rounder) - rounder;   /* an integer while |p| <= 2**51 */
        h += t;
        f += p - t;                        /* exact, |p - t| <= 1/2 */
        q += r * r;                        /* exact squares */
    }
    for (; j < dim; j++) {
        double r = (double)row[j], p = r * scaled[j];
        double t = (p + ROUNDER) - ROUNDER;
        h[0] += t;
        f[0] += p - t;
        q[0] += r * r;
    }
    RowSums out = {(h[0] + h[1]) + (h[2] + h[3]), (f[0] + f[1]) + (f[2] + f[3]),
                   (q[0] + q[1]) + (q[2] + q[3])};
    return out;
}

/* Whether every fraction of the row is a multiple of 2**-m (``power`` = 2**m). */
static int fractions_exact(const float *row, const double *scaled, Py_ssize_t dim, double power)
{
    for (Py_ssize_t j = 0; j < dim; j++) {
        double s = (double)row[j] * scaled[j];
        double g = (s - ((s + ROUNDER) - ROUNDER)) * power; /* exact: a power of two */
        if (g != floor(g))
            return 0;
    }
    return 1;
}

static double ulp(double x) /* math.ulp */
{
    x = fabs(x);
    if (!isfinite(x))
        return x;
    double up = nextafter(x, INFINITY);
    if (isinf(up))
        return x - nextafter(x, -INFINITY);
    return up - x;
}

/* For one query: the fractions' error allowance, the power 2**m of the exact-fraction test and the
 * sum of squares of the scaled query (exact squares, summed in float64). */
typedef struct {
    double slack, power, squares;
} Bounds;

static Bounds bounds(const double *scaled, Py_ssize_t dim)
{
    Bounds out;
    double d = (double)dim;
    out.squares = 0.0;
    for (Py_ssize_t j = 0; j < dim; j++)
        out.squares += scaled[j] * scaled[j];
    out.slack = 2.0 * (d - 1.0) * d * ldexp(1.0, -53) / (1.0 - (d - 1.0) * ldexp(1.0, -53));
    int bits = 0; /* (dim - 1).bit_length() */
    for (unsigned long long v = (unsigned long long)(dim - 1); v; v >>= 1)
        bits++;
    out.power = ldexp(1.0, 53 - bits);
    return out;
}

/* The canonical score of one row into *score; 0 when the row is left to fsum.
 *
 * Every |p| and sum |t| stay below 2**51 when B = |row| * |scaled query| (padded for the rounding
 * of both sums of squares and of the square root) + dim / 2 is: |p_j| <= |row_j| * |scaled_j|,
 * whose sum is at most B - dim / 2 (Cauchy-Schwarz), and |t_j| <= |p_j| + 1/2. */
static int row_score(const float *row, const double *scaled, Py_ssize_t dim, Bounds bd,
                     double *score)
{
    if (dim > MAX_DIM)
        return 0;
    RowSums r = row_sums(row, scaled, dim);
    double reach = sqrt(r.squares * bd.squares) * (1.0 + ldexp(1.0, -30)) + 0.5 * (double)dim;
    if (!(reach < TWO51)) /* also NaN or infinite values */
        return 0;
    double x = r.high + r.fraction;
    double back = x - r.high;
    double e = (r.high - (x - back)) + (r.fraction - back); /* x + e == H + F exactly */
    double gap = ulp(x);
    if (fabs(e) + bd.slack < 0.5 * gap && fabs(x) != TWO52 * gap) {
        *score = x * UNSCALE;
        return 1;
    }
    if (x != 0.0 && fractions_exact(row, scaled, dim, bd.power)) {
        *score = x * UNSCALE;
        return 1;
    }
    return 0;
}

/* A C-contiguous buffer of ``ndim`` dimensions whose items are ``itemsize`` bytes of one of the
 * struct formats ``kinds`` ("f": float32, "?": bool, "lq": int64), or an error naming ``what``. */
static int get_buffer(PyObject *obj, Py_buffer *view, int ndim, const char *kinds, int itemsize,
                      const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    const char *format = view->format ? view->format : "B";
    if (format[0] == '<' || format[0] == '=' || format[0] == '@')
        format++;
    if (view->ndim != ndim || view->itemsize != itemsize || !format[0] || format[1]
        || !strchr(kinds, format[0])) {
        PyErr_Format(PyExc_ValueError, "%s must be a C-contiguous %d-D %s array", what, ndim,
                     kinds[0] == 'f' ? "float32" : kinds[0] == '?' ? "bool" : "int64");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* The query's values as float64, times 2**50 (exact). */
static double *scaled_query(const Py_buffer *query)
{
    Py_ssize_t dim = query->shape[0];
    double *out = PyMem_Malloc((size_t)(dim ? dim : 1) * sizeof(double));
    if (out == NULL)
        return (double *)PyErr_NoMemory();
    const float *q = query->buf;
    for (Py_ssize_t j = 0; j < dim; j++)
        out[j] = (double)q[j] * SCALE;
    return out;
}

/* (scores, unsure): a list of floats, and the positions in it left to fsum (their score 0.0). */
static PyObject *results(const double *scores, const char *sure, Py_ssize_t count,
                         const Py_ssize_t *rows)
{
    PyObject *values = PyList_New(count), *unsure = PyList_New(0), *row_list = NULL;
    if (values == NULL || unsure == NULL)
        goto fail;
    if (rows != NULL && (row_list = PyList_New(count)) == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *value = PyFloat_FromDouble(sure[i] ? scores[i] : 0.0);
        if (value == NULL)
            goto fail;
        PyList_SET_ITEM(values, i, value);
        if (row_list != NULL) {
            PyObject *row = PyLong_FromSsize_t(rows[i]);
            if (row == NULL)
                goto fail;
            PyList_SET_ITEM(row_list, i, row);
        }
        if (!sure[i]) {
            PyObject *position = PyLong_FromSsize_t(i);
            if (position == NULL || PyList_Append(unsure, position) < 0) {
                Py_XDECREF(position);
                goto fail;
            }
            Py_DECREF(position);
        }
    }
    if (row_list != NULL)
        return Py_BuildValue("(NNN)", row_list, values, unsure);
    return Py_BuildValue("(NN)", values, unsure);
fail:
    Py_XDECREF(values);
    Py_XDECREF(unsure);
    Py_XDECREF(row_list);
    return NULL;
}

PyDoc_STRVAR(exact_scores_doc,
"exact_scores(rows, query) -> (scores, unsure)\n\n"
"The canonical score of each row of ``rows`` (float32, C-contiguous, rows x dim) against\n"
"``query`` (float32, dim): math.fsum of the float64 products, bit for bit, except at the\n"
"positions listed in ``unsure`` (their score is 0.0: the caller sums them with math.fsum).");

static PyObject *exact_scores(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *rows_obj, *query_obj, *out = NULL;
    Py_buffer rows, query;
    if (!PyArg_ParseTuple(args, "OO:exact_scores", &rows_obj, &query_obj))
        return NULL;
    if (get_buffer(rows_obj, &rows, 2, "f", 4, "rows") < 0)
        return NULL;
    if (get_buffer(query_obj, &query, 1, "f", 4, "query") < 0) {
        PyBuffer_Release(&rows);
        return NULL;
    }
    Py_ssize_t count = rows.shape[0], dim = rows.shape[1];
    double *scaled = NULL, *scores = NULL;
    char *sure = NULL;
    if (query.shape[0] != dim) {
        PyErr_Format(PyExc_ValueError, "query has %zd values, the rows %zd", query.shape[0], dim);
        goto done;
    }
    scaled = scaled_query(&query);
    scores = PyMem_Malloc((size_t)(count ? count : 1) * sizeof(double));
    sure = PyMem_Malloc((size_t)(count ? count : 1));
    if (scaled == NULL || scores == NULL || sure == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Bounds bd = bounds(scaled, dim ? dim : 1);
    const float *data = rows.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; i++)
        sure[i] = (char)(dim > 0 && row_score(data + i * dim, scaled, dim, bd, &scores[i]));
    Py_END_ALLOW_THREADS
    out = results(scores, sure, count, NULL);
done:
    PyMem_Free(scaled);
    PyMem_Free(scores);
    PyMem_Free(sure);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&query);
    return out;
}

/* The largest float32 at or below ``bound`` (rows.py's _float32_at_most, for finite bounds). */
static float float32_at_most(double bound)
{
    float near = (float)bound;
    if (!((double)near > bound))
        return near;
    return nextafterf(near, -INFINITY);
}

static void sift_down(float *heap, Py_ssize_t size, Py_ssize_t i)
{
    float value = heap[i];
    for (;;) {
        Py_ssize_t child = 2 * i + 1;
        if (child >= size)
            break;
        if (child + 1 < size && heap[child + 1] < heap[child])
            child++;
        if (!(heap[child] < value))
            break;
        heap[i] = heap[child];
        i = child;
    }
    heap[i] = value;
}

/* Which rows a search may return: all, those flagged in ``alive`` (live now), or those visible as
 * of ``seq`` (born <= seq < died); never ``skip``. */
typedef struct {
    const char *alive;
    const long long *born, *died;
    long long seq;
    Py_ssize_t skip;
} Shown;

static inline int shown(const Shown *v, Py_ssize_t row)
{
    if (row == v->skip)
        return 0;
    if (v->born != NULL)
        return v->born[row] <= v->seq && v->died[row] > v->seq;
    return v->alive == NULL || v->alive[row];
}

/* The k-th largest fast score among the shown rows of values[0:m] (main rows lo...) into *kth,
 * -INFINITY when fewer than k are shown; 0 when a shown score is NaN. */
static int kth_shown(const float *values, Py_ssize_t m, Py_ssize_t lo, Py_ssize_t k,
                     const Shown *v, float *heap, float *kth)
{
    Py_ssize_t size = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        if (!shown(v, lo + i))
            continue;
        float x = values[i];
        if (isnan(x))
            return 0;
        if (size < k) {
            heap[size++] = x;
            if (size == k)
                for (Py_ssize_t j = k / 2; j-- > 0;)
                    sift_down(heap, k, j);
        } else if (x > heap[0]) {
            heap[0] = x;
            sift_down(heap, k, 0);
        }
    }
    *kth = size < k ? -INFINITY : heap[0];
    return 1;
}

PyDoc_STRVAR(slice_top_doc,
"slice_top(vecs, query, approx, lo, k, eps, alive, born, died, seq, skip)\n"
"    -> (rows, scores, unsure) | None\n\n"
"SortedRows.top_of_slice's candidates and their exact scores in one call. ``approx`` holds the\n"
"fast scores of main rows [lo, lo + len(approx)) of ``vecs`` (float32, rows x dim). Rows shown:\n"
"with ``born`` and ``died`` (int64 per main row) those with born <= seq < died, else those\n"
"flagged in ``alive`` (bool per main row; None: every row), never ``skip`` (-1: none). The\n"
"candidates are the shown rows whose fast score is at least the largest float32 at or below\n"
"(the k-th best shown fast score - 2 eps); every shown row when fewer than k are. Returns their\n"
"main rows, their canonical scores and the positions left to math.fsum (as exact_scores), or\n"
"None when a shown fast score is NaN (the caller then takes its numpy path).");

static PyObject *slice_top(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *vecs_obj, *query_obj, *approx_obj, *alive_obj, *born_obj, *died_obj, *out = NULL;
    Py_ssize_t lo, k, skip;
    long long seq;
    double eps;
    if (!PyArg_ParseTuple(args, "OOOnndOOOLn:slice_top", &vecs_obj, &query_obj, &approx_obj, &lo,
                          &k, &eps, &alive_obj, &born_obj, &died_obj, &seq, &skip))
        return NULL;
    Py_buffer views[6]; /* vecs, query, approx, alive, born, died */
    PyObject *objs[6] = {vecs_obj, query_obj, approx_obj, alive_obj, born_obj, died_obj};
    static const char *kinds[6] = {"f", "f", "f", "?", "lq", "lq"};
    static const int sizes[6] = {4, 4, 4, 1, 8, 8};
    static const int dims[6] = {2, 1, 1, 1, 1, 1};
    static const char *names[6] = {"vecs", "query", "approx", "alive", "born", "died"};
    int got = 0;
    for (; got < 6; got++) {
        if (objs[got] == Py_None && got >= 3)
            continue;
        if (get_buffer(objs[got], &views[got], dims[got], kinds[got], sizes[got], names[got]) < 0)
            goto release;
    }
    Py_buffer *vecs = &views[0], *query = &views[1], *approx = &views[2];
    int has_alive = alive_obj != Py_None, has_born = born_obj != Py_None;
    Py_ssize_t n = vecs->shape[0], dim = vecs->shape[1], m = approx->shape[0];
    if (query->shape[0] != dim || dim < 1 || k < 1 || lo < 0 || lo > n || m > n - lo
        || (has_alive && views[3].shape[0] < lo + m) || has_born != (died_obj != Py_None)
        || (has_born && (views[4].shape[0] < lo + m || views[5].shape[0] < lo + m))) {
        PyErr_SetString(PyExc_ValueError, "slice_top: arguments out of range");
        goto release;
    }
    double *scaled = scaled_query(query), *scores = PyMem_Malloc((size_t)(m ? m : 1) * sizeof(double));
    Py_ssize_t *rows = PyMem_Malloc((size_t)(m ? m : 1) * sizeof(Py_ssize_t));
    float *heap = PyMem_Malloc((size_t)(k < m ? k : 1) * sizeof(float));
    char *sure = PyMem_Malloc((size_t)(m ? m : 1));
    if (scaled == NULL || rows == NULL || heap == NULL || scores == NULL || sure == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const float *fast = approx->buf, *data = vecs->buf;
    Shown v = {has_alive ? views[3].buf : NULL, has_born ? views[4].buf : NULL,
               has_born ? views[5].buf : NULL, seq, skip};
    Bounds bd = bounds(scaled, dim);
    Py_ssize_t count = 0;
    int usable = 1;
    Py_BEGIN_ALLOW_THREADS
    float kth = -INFINITY;
    if (m > k)
        usable = kth_shown(fast, m, lo, k, &v, heap, &kth);
    if (usable) {
        float threshold = kth == -INFINITY ? -INFINITY : float32_at_most((double)kth - 2.0 * eps);
        for (Py_ssize_t i = 0; i < m; i++)
            if ((m <= k || fast[i] >= threshold) && shown(&v, lo + i))
                rows[count++] = lo + i;
        for (Py_ssize_t i = 0; i < count; i++)
            sure[i] = (char)row_score(data + rows[i] * dim, scaled, dim, bd, &scores[i]);
    }
    Py_END_ALLOW_THREADS
    out = usable ? results(scores, sure, count, rows) : Py_NewRef(Py_None);
done:
    PyMem_Free(scaled);
    PyMem_Free(rows);
    PyMem_Free(heap);
    PyMem_Free(scores);
    PyMem_Free(sure);
release:
    while (got-- > 0)
        if (!(objs[got] == Py_None && got >= 3))
            PyBuffer_Release(&views[got]);
    return out;
}

static PyMethodDef methods[] = {
    {"exact_scores", exact_scores, METH_VARARGS, exact_scores_doc},
    {"slice_top", slice_top, METH_VARARGS, slice_top_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels",
    "coniti's compiled scoring kernels (optional; numpy twins in coniti.structure).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernels(void)
{
    return PyModule_Create(&module);
}
