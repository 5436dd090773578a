;;;; bench.lisp - `rontolisp bench': how fast the matrix-vector kernels run,
;;;; against how fast this machine can read memory.
;;;;
;;;; For each matrix (a standard set of shapes, or every 2-D tensor of a
;;;; GGUF file) it times the f32 baseline and the Q8_0 product on the
;;;; scalar reference path and on the best SIMD path, with one thread and
;;;; with all of them, and reports the median microseconds per call, the
;;;; weight bytes streamed per second, that rate as a share of the read
;;;; bandwidth a streaming probe measures in the same run, and the speed-up
;;;; over the f32 path.  It also times quantizing (scalar vs SIMD).  The
;;;; kernels run through %BENCH-MATVEC, which names the path and thread
;;;; count explicitly and never cuts threads for small products.
;;;;
;;;; Speed is reported, never checked: a benchmark is not a test.  The one
;;;; thing it does check is cheap and must hold on every run: the Q8_0
;;;; paths and thread counts agree bit for bit.

(in-package "COMMAND-LINE")

(defparameter *bench-standard-shapes*
  '((64 192) (1024 1024) (4096 4096) (4096 14336))
  "The (rows cols) the bench times without a file; one shape larger than
the last-level cache is added at run time (BENCH-LLC-SHAPE).")

(defparameter *bench-default-iters* 20
  "Timed calls per measurement unless --iters says otherwise.")

(defparameter *bench-budget-ns* 3000000000
  "A measurement stops early once this many nanoseconds have passed (with
at least 3 calls timed), so slow paths on big matrices stay bounded.")

(defparameter *bench-quantize-values* (* 16 1024 1024)
  "Values quantized per timed run of the quantize throughput test.")

(defun bench-llc-shape (llc-bytes)
  "(rows cols) of a matrix whose Q8_0 weights are about four times the
last-level cache (64 MiB assumed when unknown): 16384 columns, rows a
multiple of 1024 from 1024 to 16384 (so the f32 copy stays within 1 GiB)."
  (let* ((cols 16384)
         (llc (if (and llc-bytes (plusp llc-bytes)) llc-bytes (* 64 1024 1024)))
         (row-bytes (* (floor cols 32) 34))
         (rows (* 1024 (ceiling (ceiling (* 4 llc) row-bytes) 1024))))
    (list (max 1024 (min 16384 rows)) cols)))

(defun bench-llc-entry (llc-bytes)
  "(rows cols name) of the standard shape larger than the last-level cache."
  (destructuring-bind (rows cols) (bench-llc-shape llc-bytes)
    (list rows cols
          (if (and llc-bytes (plusp llc-bytes))
              (format nil "~Dx~D (~,1Fx LLC)" rows cols
                      (/ (bench-q8-bytes rows cols) llc-bytes))
              (format nil "~Dx~D (> LLC)" rows cols)))))

;;; Small helpers.

(defun bench-median (times count)
  "The median of the first COUNT numbers of the vector TIMES.  A merge sort
\(STABLE-SORT): ECL's SORT of a vector is quadratic when most values are
equal, as thousands of timings of a product of a few hundred nanoseconds
are."
  (let ((v (stable-sort (subseq times 0 count) #'<)))
    (if (oddp count)
        (aref v (floor count 2))
        (/ (+ (aref v (1- (floor count 2))) (aref v (floor count 2))) 2))))

(defun bench-progress (fmt &rest args)
  "One line of progress on stderr."
  (format *error-output* "~&bench: ~?~%" fmt args)
  (finish-output *error-output*))

(defun bench-q8-bytes (rows cols) (* rows (floor cols 32) 34))
(defun bench-f32-bytes (rows cols) (* rows cols 4))

(defun bench-number (x)
  "X for JSON: a double-float, or :null for NIL."
  (if x (float x 1d0) :null))

;;; What runs.

(defstruct (bench-run (:constructor make-bench-run (format path-name path threads)))
  "One measured configuration of one matrix."
  format          ; :f32 or :q8_0
  path-name       ; "scalar", "avx2", ...
  path            ; the rl_path id
  threads
  (calls nil)     ; timed calls, NIL when not measured
  (ns nil)        ; median nanoseconds per call
  (bytes nil)     ; weight bytes per call
  (note nil))     ; why not measured

(defun bench-format-name (run)
  (if (eq (bench-run-format run) :f32) "f32" "q8_0"))

(defun bench-run-gbps (run)
  (and (bench-run-ns run) (/ (bench-run-bytes run) (bench-run-ns run))))

(defstruct (bench-matrix (:constructor make-bench-matrix (name rows cols source)))
  "A matrix the bench times: its name, shape, where it came from (\"random\"
or the GGUF type name), and the runs."
  name rows cols source (runs '()) (note nil))

(defun bench-configurations (cpu threads)
  "The runs of one matrix: f32 and Q8_0 SIMD with 1 and THREADS threads, the
Q8_0 scalar reference with 1; without SIMD the f32 path is scalar."
  (let* ((paths (getf cpu :paths))
         (best (car (first (last paths))))
         (best-name (cdr (first (last paths))))
         (counts (remove-duplicates (list 1 threads))))
    (append (loop for n in counts collect (make-bench-run :f32 best-name best n))
            (list (make-bench-run :q8_0 "scalar" 0 1))
            (loop for n in counts collect (make-bench-run :q8_0 best-name best n)))))

(defun bench-time (matrix x out run iters)
  "Fill RUN with the median time of MATRIX times X on RUN's path and
threads."
  (multiple-value-bind (times count message)
      (%bench-matvec matrix x out (bench-run-path run) (bench-run-threads run) iters
                     *bench-budget-ns*)
    (if times
        (setf (bench-run-calls run) count
              (bench-run-ns run) (bench-median times count))
        (setf (bench-run-note run) (format nil "~(~A~): ~A" count message)))
    run))

(defun bench-one (bm f32 q8 cpu threads iters)
  "Time every configuration for the bench-matrix BM: F32 its single-float
matrix (or NIL), Q8 its quantized matrix (or NIL when it has none)."
  (let* ((rows (bench-matrix-rows bm))
         (cols (bench-matrix-cols bm))
         (x (%bench-fill-random (make-array cols :element-type 'single-float) 7))
         (out (make-array rows :element-type 'single-float))
         (q8-result nil))
    (setf (bench-matrix-runs bm) (bench-configurations cpu threads))
    (dolist (run (bench-matrix-runs bm))
      (let ((m (if (eq (bench-run-format run) :f32) f32 q8)))
        (cond ((null m)
               (setf (bench-run-note run)
                     (if (eq (bench-run-format run) :f32)
                         "no f32 form"
                         (or (bench-matrix-note bm) "no Q8_0 form"))))
              (t
               (bench-progress "~A ~A ~A, ~D thread~:P" (escape-control (bench-matrix-name bm))
                               (bench-format-name run) (bench-run-path-name run)
                               (bench-run-threads run))
               (setf (bench-run-bytes run)
                     (if (eq (bench-run-format run) :f32)
                         (bench-f32-bytes rows cols)
                         (bench-q8-bytes rows cols)))
               (bench-time m x out run iters)
               ;; every Q8_0 path and thread count must give the same bits
               (when (and (eq (bench-run-format run) :q8_0) (bench-run-ns run))
                 (if q8-result
                     (unless (every (lambda (a b) (= (%single-bits a) (%single-bits b)))
                                    q8-result out)
                       (rontolisp-error 'bench "the ~A path with ~D thread~:P answered ~
different bits for ~A than the first Q8_0 path (a kernel bug)"
                                        (bench-run-path-name run) (bench-run-threads run)
                                        (bench-matrix-name bm)))
                     (setf q8-result (copy-seq out))))))))
    bm))

;;; Matrix times a sequence: one matmul against a matvec per token.

(defparameter *bench-matmul-shapes* '((768 768) (2304 768) (4096 4096))
  "The Q8_0 weights of the matmul rows: an encoder's attention output and
fused QKV, and one far bigger than the caches.")

(defparameter *bench-matmul-tokens* 128
  "Tokens per sequence in the matmul rows.")

(defun bench-matmul-rows (shapes tokens threads iters)
  "Time random Q8_0 weights of each of SHAPES, a list of (rows cols), times
TOKENS random activation rows: one VEC:MATMUL with :q8 and with :q8x2
against a matvec per token (the same bits), with 1 and THREADS threads.  A
list of plists, times in microseconds (medians of ITERS calls)."
  (loop for (rows cols) in shapes
        for seed from 101
        nconc
        (let* ((m (quantize (%bench-fill-random
                             (make-array (list rows cols) :element-type 'single-float) seed)
                            'q8-0))
               (xs (%bench-fill-random (make-array (list tokens cols) :element-type 'single-float)
                                       (+ seed 1000)))
               (out (make-array (list tokens rows) :element-type 'single-float)))
          (flet ((median-us (n mode)
                   (multiple-value-bind (times status message) (%bench-matmul m xs out n iters mode)
                     (unless times
                       (rontolisp-error 'bench "the matmul kernel failed (~(~A~)): ~A" status
                                        message))
                     (/ (bench-median times iters) 1d3))))
            (loop for n in (remove-duplicates (list 1 threads))
                  collect (progn
                            (bench-progress "matmul ~Dx~D x ~D tokens, ~D thread~:P" rows cols
                                            tokens n)
                            (let ((mm (median-us n 0)) (x2 (median-us n 1)) (mv (median-us n 2)))
                              (list :rows rows :cols cols :tokens tokens :threads n
                                    :matmul-us mm :q8x2-us x2 :matvecs-us mv
                                    :ratio (/ mv mm)))))))))

(defun print-bench-matmul (stream rows)
  "The matmul rows of the report, when there are any."
  (when rows
    (format stream "~%Q8_0 matrix times ~D tokens: one matmul against a matvec per token ~
(us per sequence; ratio = matvecs / matmul)~%" (getf (first rows) :tokens))
    (format stream "~12A ~3@A ~11@A ~11@A ~11@A ~7@A~%"
            "matrix" "thr" "matmul q8" "q8x2" "matvecs" "ratio")
    (dolist (r rows)
      (format stream "~12A ~3D ~11,1F ~11,1F ~11,1F ~6,2Fx~%"
              (format nil "~Dx~D" (getf r :rows) (getf r :cols)) (getf r :threads)
              (getf r :matmul-us) (getf r :q8x2-us) (getf r :matvecs-us) (getf r :ratio)))))

;;; Where the matrices come from.

(defun bench-random-matrices (shapes cpu threads iters)
  "Bench random matrices of SHAPES, a list of (rows cols) or (rows cols
name)."
  (loop for (rows cols name) in shapes
        for seed from 1
        collect (let* ((bm (make-bench-matrix (or name (format nil "~Dx~D" rows cols))
                                              rows cols "random"))
                       (f32 (progn (bench-progress "~A: making random weights" (escape-control (bench-matrix-name bm)))
                                   (%bench-fill-random
                                    (make-array (list rows cols) :element-type 'single-float)
                                    (* 1000 seed))))
                       (q8 (bench-quantize-or-note bm f32)))
                  (prog1 (bench-one bm f32 q8 cpu threads iters)
                    (setf f32 nil q8 nil)))))

(defun bench-quantize-or-note (bm f32)
  "F32 quantized to Q8_0, or NIL with a note in BM saying why not."
  (cond ((not (zerop (mod (bench-matrix-cols bm) 32)))
         (setf (bench-matrix-note bm)
               (format nil "row length ~D is not a multiple of 32" (bench-matrix-cols bm)))
         nil)
        (t
         (handler-case (quantize f32 'q8-0)
           (quantize-error (c)
             (setf (bench-matrix-note bm) (condition-line c))
             nil)))))

(defun bench-file-matrices (f cpu threads iters)
  "Bench every 2-D F32, F16, BF16 or Q8_0 tensor of the GGUF file object F."
  (loop for info in (gguf:tensor-infos f)
        for shape = (gguf:tensor-info-shape info)
        for type = (gguf:tensor-info-type info)
        when (= 2 (length shape))
          collect (let ((bm (make-bench-matrix (gguf:tensor-info-name info)
                                               (first shape) (second shape) type)))
                    (cond
                      ((not (find-tensor-type (gguf:tensor-info-type-id info)))
                        (setf (bench-matrix-note bm)
                              (if (quantized-type-p (gguf:tensor-info-type-id info))
                                  (format nil "type ~A: timed in its own type under Products" type)
                                  (format nil "type ~A is not benchmarked" type)))
                        bm)
                      (t
                        (handler-case
                            (let* ((data (gguf:tensor f (gguf:tensor-info-name info)))
                                   (f32 (typecase data
                                          (quantized-matrix (dequantize data))
                                          ((or float16-array bfloat16-array)
                                           (half-array-to-single data))
                                          (t data)))
                                   (q8 (if (quantized-matrix-p data)
                                           data
                                           (bench-quantize-or-note bm f32))))
                              (bench-one bm f32 q8 cpu threads iters))
                          (storage-condition ()
                            (setf (bench-matrix-note bm) "out of memory")
                            (setf (bench-matrix-runs bm) '())
                            bm)))))))

;;; Machine-wide measurements.

(defun bench-probe (threads reps)
  "The read-bandwidth probe with THREADS threads: its best GB/s, or NIL."
  (bench-progress "probing read bandwidth, ~D thread~:P" threads)
  (values (%bench-read-gbps 0 threads reps)))

;;; The probe's figures, kept between runs: each probe writes them to
;;; $XDG_CACHE_HOME/rontolisp/read-bandwidth.json, and `bench --no-probe'
;;; reports them (as cached) instead of reading gigabytes again.

(defun user-cache-directory ()
  "rontolisp's directory for what it keeps between runs, ending in /:
$XDG_CACHE_HOME/rontolisp/ when XDG_CACHE_HOME is an absolute path, else
$HOME/.cache/rontolisp/ (the XDG base directory rule); NIL when neither is
set."
  (flet ((absolute (var)
           (let ((v (ext:getenv var)))
             (and v (plusp (length v)) (char= #\/ (char v 0)) (string-right-trim "/" v)))))
    (let ((xdg (absolute "XDG_CACHE_HOME")) (home (absolute "HOME")))
      (cond (xdg (format nil "~A/rontolisp/" xdg))
            (home (format nil "~A/.cache/rontolisp/" home))))))

(defun bench-bandwidth-cache-path ()
  "The file of the cached read-bandwidth figures, or NIL."
  (let ((dir (user-cache-directory)))
    (and dir (concatenate 'string dir "read-bandwidth.json"))))

(defun bench-machine (cpu)
  "What a cached figure must have been measured on: the CPU's cores,
last-level cache, SIMD path and the probe's size."
  (list :object (cons "cores" (getf cpu :cores)) (cons "llc_bytes" (getf cpu :llc-bytes))
        (cons "simd_path" (cdr (first (last (getf cpu :paths)))))
        (cons "probe_bytes" (getf cpu :probe-bytes))))

(defun bench-read-bandwidth-cache (cpu)
  "The cached figures of this machine (see BENCH-MACHINE): a list of
(threads gbps unix-time), or NIL when there are none (no file, a file of
another machine, or one that cannot be read, which is then ignored)."
  (let* ((path (bench-bandwidth-cache-path))
         (json (and path (eq :file (path-kind path)) (ignore-errors (read-json-file path))))
         (machine (and (hash-table-p json) (gethash "machine" json)))
         (probes (and (hash-table-p json) (gethash "probes" json))))
    (when (and (hash-table-p machine) (vectorp probes)
               (loop for (k . v) in (rest (bench-machine cpu))
                     always (equal v (gethash k machine))))
      (loop for p across probes
            for threads = (and (hash-table-p p) (gethash "threads" p))
            for gbps = (and (hash-table-p p) (gethash "gbps" p))
            for time = (and (hash-table-p p) (gethash "time" p))
            when (and (integerp threads) (plusp threads) (realp gbps) (plusp gbps) (integerp time))
              collect (list threads gbps time)))))

(defun bench-write-read-bandwidth-cache (cpu probes)
  "Keep the figures PROBES ((threads . gbps) ...) just measured in the
cache, with those of other thread counts already there.  A cache that
cannot be written is said on stderr and otherwise ignored."
  (let* ((path (bench-bandwidth-cache-path))
         (now (- (get-universal-time) #.(encode-universal-time 0 0 0 1 1 1970 0)))
         (kept (remove-if (lambda (c) (assoc (first c) probes)) (bench-read-bandwidth-cache cpu)))
         (all (sort (append kept (loop for (n . gbps) in probes
                                       when gbps collect (list n gbps now)))
                    #'< :key #'first)))
    (when path
      (handler-case
          (progn
            (ensure-directories path)
            (with-output-to-file (s path)
              (write-json (list :object (cons "machine" (bench-machine cpu))
                                (cons "probes"
                                      (map 'vector (lambda (c)
                                                     (list :object (cons "threads" (first c))
                                                           (cons "gbps" (bench-number (second c)))
                                                           (cons "time" (third c))))
                                           all)))
                          s :indent 1)
              (terpri s)))
        (rontolisp-error (c)
          (bench-progress "the read bandwidth is not cached: ~A" (condition-line c)))))))

(defun bench-read-bandwidth (cpu threads reps probe)
  "The read bandwidth with 1 and THREADS threads, as (values PROBES
SOURCE): PROBES ((threads . gbps-or-nil) ...), SOURCE :PROBE when PROBE
is true (the probe runs, and its figures are cached), else :CACHE with
the oldest time of the cached figures used, or NIL when none is cached."
  (let ((counts (remove-duplicates (list 1 threads))))
    (if probe
        (let ((probes (loop for n in counts collect (cons n (bench-probe n reps)))))
          (bench-write-read-bandwidth-cache cpu probes)
          (values probes :probe))
        (let* ((cached (bench-read-bandwidth-cache cpu))
               (used (remove nil (mapcar (lambda (n) (assoc n cached)) counts))))
          (values (mapcar (lambda (n) (cons n (second (assoc n cached)))) counts)
                  (and used :cache)
                  (and used (reduce #'min used :key #'third)))))))

(defun bench-utc-time (unix-time)
  "UNIX-TIME as YYYY-MM-DD HH:MM UTC."
  (multiple-value-bind (sec min hour day month year)
      (decode-universal-time (+ unix-time #.(encode-universal-time 0 0 0 1 1 1970 0)) 0)
    (declare (ignore sec))
    (format nil "~D-~2,'0D-~2,'0D ~2,'0D:~2,'0D UTC" year month day hour min)))

(defun bench-quantize-throughput (cpu reps)
  "((path-name . values-per-second) ...) for the scalar and best quantizer."
  (let* ((x (%bench-fill-random (make-array *bench-quantize-values* :element-type 'single-float)
                                99))
         (best (first (last (getf cpu :paths))))
         (paths (remove-duplicates (list (cons 0 "scalar") best) :key #'car)))
    (loop for (id . name) in paths
          collect (progn
                    (bench-progress "quantize throughput, ~A" name)
                    (let ((times (%bench-quantize x id reps)))
                      (cons name (and times (/ (* 1d9 (length x))
                                               (bench-median times (length times))))))))))

;;; Reports.

(defun bench-vs-f32 (bm run)
  "How many times faster RUN is than the f32 path with as many threads."
  (let ((f32 (find-if (lambda (r) (and (eq (bench-run-format r) :f32)
                                       (= (bench-run-threads r) (bench-run-threads run))))
                      (bench-matrix-runs bm))))
    (and f32 (bench-run-ns f32) (bench-run-ns run)
         (/ (bench-run-ns f32) (bench-run-ns run)))))

(defun bench-share (run probes)
  "RUN's weight GB/s as a share of the probe's with as many threads."
  (let ((probe (cdr (assoc (bench-run-threads run) probes))))
    (and probe (bench-run-gbps run) (/ (bench-run-gbps run) probe))))

(defun print-bench-report (stream report)
  (destructuring-bind (&key cpu threads iters probes probe-source probe-time quantize
                         matrices source &allow-other-keys)
      report
    ;; a file or tensor name escaped as inspect prints it: a newline in
    ;; one must not break the table's lines
    (format stream "rontolisp bench: ~A~%" (escape-control source))
    (format stream "machine: ~D core~:P, kernel paths ~{~A~^ ~} (SIMD path ~A), last-level cache ~
~:[unknown~;~:*~,1F MiB~]~%"
            (getf cpu :cores) (mapcar #'cdr (getf cpu :paths)) (cdr (first (last (getf cpu :paths))))
            (and (plusp (getf cpu :llc-bytes)) (/ (getf cpu :llc-bytes) 1048576d0)))
    (format stream "timing: median of up to ~D call~:P per measurement (at most ~,1F s each), ~
~D thread~:P for \"all\"~%" iters (/ *bench-budget-ns* 1d9) threads)
    (if probe-source
        (format stream "read bandwidth (~A, ~D MiB):~{ ~{~D thread~:P ~:[n/a~;~:*~,1F GB/s~]~}~^,~}~%"
                (if (eq probe-source :cache)
                    (format nil "cached, measured ~A" (bench-utc-time probe-time))
                    "probe")
                (floor (getf cpu :probe-bytes) 1048576)
                (loop for (n . gbps) in probes collect (list n gbps)))
        (format stream "read bandwidth: not measured (--no-probe, and no earlier probe cached)~%"))
    (format stream "quantize f32 -> Q8_0 (~D values):~{ ~{~A ~:[n/a~;~:*~D Mvalues/s~]~}~^,~}~@[ (SIMD ~,1Fx scalar)~]~%~%"
            *bench-quantize-values*
            (loop for (name . vps) in quantize collect (list name (and vps (round vps 1d6))))
            (let ((s (cdr (first quantize))) (v (cdr (first (last quantize)))))
              (and s v (> (length quantize) 1) (/ v s))))
    (let ((width (reduce #'max matrices :key (lambda (bm) (length (bench-label bm)))
                                        :initial-value 20)))
      (format stream "~vA ~6A ~11A ~3@A ~11@A ~8@A ~7@A ~7@A~%"
              width "matrix (rows x cols)" "format" "path" "thr" "us/call" "GB/s" "probe%" "vs f32")
      (dolist (bm matrices)
        (let ((label (bench-label bm)))
          (when (null (bench-matrix-runs bm))
            (format stream "~vA ~A~%" width label (or (bench-matrix-note bm) "not measured")))
          (dolist (run (bench-matrix-runs bm))
            (if (bench-run-ns run)
              (format stream "~vA ~6A ~11A ~3D ~11,1F ~8,2F ~6D% ~6,2Fx~%"
                      width label (bench-format-name run)
                      (bench-run-path-name run) (bench-run-threads run)
                      (/ (bench-run-ns run) 1d3) (bench-run-gbps run)
                      (round (* 100 (or (bench-share run probes) 0)))
                      (or (bench-vs-f32 bm run) 0))
              (format stream "~vA ~6A ~11A ~3D   not measured: ~A~%"
                      width label (bench-format-name run)
                      (bench-run-path-name run) (bench-run-threads run)
                      (bench-run-note run)))
            (setf label "")))))
    (print-bench-matmul stream (getf report :matmul))
    (print-bench-products stream (getf report :products) (getf report :ggml)
                          (cdr (first (last (getf cpu :paths)))))))

(defun bench-label (bm)
  "BM's name escaped as inspect prints it (ESCAPE-CONTROL), with its shape
unless the name is the shape."
  (let ((shape (format nil "~Dx~D" (bench-matrix-rows bm) (bench-matrix-cols bm)))
        (name (escape-control (bench-matrix-name bm))))
    (if (search shape name)
        name
        (format nil "~A ~A" name shape))))

(defun bench-json (report)
  (destructuring-bind (&key cpu threads iters probes probe-source probe-time quantize
                         matrices source kind path &allow-other-keys)
      report
    (list :object
          (cons "tool" "rontolisp bench")
          (cons "version" (version))
          (cons "source" (list :object (cons "kind" kind) (cons "description" source)
                               (cons "path" (or path :null))))
          (cons "machine"
                (list :object
                      (cons "cores" (getf cpu :cores))
                      (cons "llc_bytes" (if (plusp (getf cpu :llc-bytes)) (getf cpu :llc-bytes) :null))
                      (cons "paths" (map 'vector #'cdr (getf cpu :paths)))
                      (cons "simd_path" (cdr (first (last (getf cpu :paths)))))))
          (cons "threads" threads)
          (cons "iters" iters)
          (cons "budget_seconds" (/ *bench-budget-ns* 1d9))
          (cons "read_bandwidth"
                (list :object
                      (cons "bytes" (getf cpu :probe-bytes))
                      ;; "probe" (this run), "cache" (--no-probe), or null
                      (cons "source" (case probe-source (:probe "probe") (:cache "cache") (t :null)))
                      (cons "measured_at" (if (eq probe-source :cache)
                                              (bench-utc-time probe-time)
                                              :null))
                      (cons "gbps_by_threads"
                            (map 'vector (lambda (p)
                                           (list :object (cons "threads" (car p))
                                                 (cons "gbps" (bench-number (cdr p)))))
                                 probes))))
          (cons "quantize"
                (list :object
                      (cons "values" *bench-quantize-values*)
                      (cons "by_path"
                            (map 'vector (lambda (q)
                                           (list :object (cons "path" (car q))
                                                 (cons "mvalues_per_s"
                                                       (bench-number (and (cdr q) (/ (cdr q) 1d6))))
                                                 (cons "input_gbps"
                                                       (bench-number (and (cdr q) (/ (* 4 (cdr q)) 1d9))))))
                                 quantize))))
          (cons "matrices"
                (map 'vector
                     (lambda (bm)
                       (let ((rows (bench-matrix-rows bm)) (cols (bench-matrix-cols bm)))
                         (list :object
                               (cons "name" (bench-matrix-name bm))
                               (cons "rows" rows)
                               (cons "cols" cols)
                               (cons "source" (bench-matrix-source bm))
                               (cons "f32_bytes" (bench-f32-bytes rows cols))
                               (cons "q8_0_bytes" (if (zerop (mod cols 32))
                                                      (bench-q8-bytes rows cols)
                                                      :null))
                               (cons "note" (or (bench-matrix-note bm) :null))
                               (cons "runs"
                                     (map 'vector
                                          (lambda (run)
                                            (list :object
                                                  (cons "format" (if (eq (bench-run-format run) :f32)
                                                                     "f32" "q8_0"))
                                                  (cons "path" (bench-run-path-name run))
                                                  (cons "threads" (bench-run-threads run))
                                                  (cons "calls" (or (bench-run-calls run) :null))
                                                  (cons "us_per_call"
                                                        (bench-number (and (bench-run-ns run)
                                                                           (/ (bench-run-ns run) 1d3))))
                                                  (cons "weight_gbps" (bench-number (bench-run-gbps run)))
                                                  (cons "probe_share"
                                                        (bench-number (bench-share run probes)))
                                                  (cons "vs_f32" (bench-number (bench-vs-f32 bm run)))
                                                  (cons "note" (or (bench-run-note run) :null))))
                                          (bench-matrix-runs bm))))))
                     matrices))
          (cons "matmul"
                (map 'vector (lambda (r)
                               (cons :object
                                     (loop for (k v) on r by #'cddr
                                           collect (cons (substitute #\_ #\- (string-downcase k))
                                                         (if (floatp v) (bench-number v) v)))))
                     (getf report :matmul)))
          (cons "products" (if (getf report :products)
                               (bench-products-json (getf report :products) (getf report :ggml))
                               :null)))))

;;; The command.

(defun bench-parse-shape (option string)
  "The (rows cols) of the --shape value STRING, ROWSxCOLS."
  (let* ((x (position-if (lambda (c) (char-equal c #\x)) string))
         (rows (and x (ignore-errors (parse-integer string :end x))))
         (cols (and x (ignore-errors (parse-integer string :start (1+ x))))))
    (unless (and rows cols (<= 1 rows 1000000) (<= 1 cols 1000000)
                 (<= (* rows cols) (* 512 1024 1024)))
      (usage-error "~A expects ROWSxCOLS (each from 1 to 1000000, at most 2^29 ~
values), found ~S" option string))
    (list rows cols)))

(defun bench-measure (model &key file random shapes iters threads probe)
  "Measure what RUN-BENCH reports, on the matrices of MODEL (the file FILE
read, or the random model RANDOM made) or of SHAPES or the standard set,
and answer the report (a plist)."
  (let ((cpu (%cpu-info)))
    (multiple-value-bind (probes probe-source probe-time)
        (bench-read-bandwidth cpu threads (max 2 (min 7 iters)) probe)
      (let ((quantize (bench-quantize-throughput cpu (max 1 (min 5 iters))))
            (std (append *bench-standard-shapes* (list (bench-llc-entry (getf cpu :llc-bytes)))))
            (products '()) (ggml '()))
        (when file
          (multiple-value-setq (products ggml) (bench-products model cpu iters)))
        (list :cpu cpu :products products :ggml ggml :threads threads :iters iters :probes probes
              :probe-source probe-source :probe-time probe-time
              :quantize quantize
              :matrices (cond (model (bench-file-matrices model cpu threads iters))
                              (shapes (bench-random-matrices shapes cpu threads iters))
                              (t (bench-random-matrices std cpu threads iters)))
              ;; the matmul rows belong to the standard run only
              :matmul (unless (or model shapes)
                        (bench-matmul-rows *bench-matmul-shapes* *bench-matmul-tokens*
                                           threads (max 3 (min 7 iters))))
              :kind (cond (file "file") (model "random-model") (shapes "shapes") (t "standard"))
              :path (and file (absolute-namestring file))
              :source (cond (file (format nil "every 2-D tensor of ~A" file))
                            (model (format nil "random ~A model, Q8_0" random))
                            (shapes (format nil "random matrices ~{~{~Dx~D~}~^, ~}"
                                            (mapcar (lambda (s) (subseq s 0 2)) shapes)))
                            (t (format nil "standard shapes, random weights"))))))))

(defun run-bench (&key file random shapes (iters *bench-default-iters*) (threads (threads))
                    json (probe t))
  "Run the benchmark and answer its report (a plist); print the table to
*standard-output* and write JSON to the file JSON when given (JSON T or
\"-\": the JSON on *standard-output*, the table on *error-output*).
Without PROBE the read bandwidth is not measured: the cached figures of an
earlier probe are reported, as cached (see BENCH-READ-BANDWIDTH)."
  ;; The file is read (or the model made) first, so that a bad file fails
  ;; at once, before minutes of measuring.
  (let ((model (cond (file (gguf:read file))
                     ((and random (not (string= random "shapes")))
                      (bench-progress "making a random ~A model with Q8_0 matrices" random)
                      (random-model random :type :q8_0)))))
    (unwind-protect
         (let ((report (bench-measure model :file file :random random :shapes shapes
                                            :iters iters :threads threads :probe probe)))
           (cond ((member json '(t "-") :test #'equal)
                  ;; stdout holds the JSON alone, as every --json writes it
                  (print-bench-report *error-output* report)
                  (finish-output *error-output*)
                  (write-json (bench-json report) *standard-output* :indent 1)
                  (terpri *standard-output*))
                 (t
                  (print-bench-report *standard-output* report)
                  (finish-output *standard-output*)
                  (when json
                    (with-output-to-file (s json)
                      (write-json (bench-json report) s :indent 1)
                      (terpri s))
                    (bench-progress "wrote ~A" json))))
           report)
      (when model (gguf:close model)))))

(defun check-json-target (json)
  "Refuse a --json FILE that is a GGUF file: `bench --json model.gguf' reads
as JSON written over the model, and that is never what was meant."
  (when (and (stringp json) (string/= json "-") (eq :file (path-kind json)))
    (let ((magic (ignore-errors
                  (with-open-file (in json :element-type '(unsigned-byte 8))
                    (let ((b (make-array 4 :element-type '(unsigned-byte 8))))
                      (and (= 4 (read-sequence b in)) (map 'string #'code-char b)))))))
      (when (equal magic "GGUF")
        (usage-error "--json ~A: expected a path for the JSON, found a GGUF file, which it ~
would overwrite (the model goes before the options: bench FILE.gguf --json)" json)))))
