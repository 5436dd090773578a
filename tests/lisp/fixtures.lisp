;;;; fixtures.lisp - what several suites share: the executable under test
;;;; and running it, temporary files, the golden files and their gguf-py JSON
;;;; dumps, GGUF files built byte by byte, random test data.

(in-package "RONTOLISP-TESTS")

(defparameter *root*
  (asdf:system-source-directory "rontolisp-tests")
  "The repository's root directory: every path the tests name is relative
to it.")
(defparameter *exe* (let ((exe (ext:getenv "RONTOLISP_EXE")))
                      (namestring (if exe
                                      (merge-pathnames exe (ext:getcwd))
                                      (merge-pathnames "build/rontolisp" *root*))))
  "The executable under test, for tests of the command line (the environment
variable RONTOLISP_EXE overrides build/rontolisp), as an absolute path,
so that tests that change directory run it too (a relative
RONTOLISP_EXE is taken from the directory the tests start in).")
(defvar *tmp-counter* 0)

(defun tmp-path (name)
  "A fresh path under the system's temporary directory."
  (format nil "~A/rl-test-~D-~D-~A"
          (string-right-trim "/" (or (ext:getenv "TMPDIR") "/tmp"))
          (ext:getpid) (incf *tmp-counter*) name))

(defun golden (name)
  "The path of a file under tests/golden/, as a string."
  (namestring (merge-pathnames (concatenate 'string "tests/golden/" name) *root*)))

(defun read-file-string (path)
  (with-open-file (s path :external-format :utf-8)
    (let* ((str (make-string (file-length s)))
           (n (read-sequence str s)))
      (subseq str 0 n))))

(defun write-file-string (path string)
  (with-open-file (s path :direction :output :if-exists :supersede
                          :external-format :utf-8)
    (write-string string s))
  path)

(defparameter *child-deadline* 600
  "Seconds any child process of the tests may run: at the deadline it is
killed and the test fails (a test never waits for a child without one).")

(defun kill-pid (pid signal)
  "Send the process PID the signal number SIGNAL through kill(2) itself (no
kill program needs to be installed); answers T when it was sent."
  (and pid (plusp pid)
       (zerop (si:call-cfun (si:find-foreign-symbol "kill" :default :pointer-void 0)
                            :int '(:int :int) (list pid signal)))))

(defun signal-process (process signal)
  "Send the child PROCESS (of RUN-CHILD) the signal number SIGNAL; answers T
when it was sent."
  (kill-pid (ext:external-process-pid process) signal))

(defun process-descendants (pid)
  "The process ids of PID's children, their children and so on, read from
/proc (NIL where there is none)."
  (let ((parents (make-hash-table))
        ;; A process that ends while /proc is listed can fail the listing:
        ;; list again.
        (dirs (loop repeat 5
                    for dirs = (ignore-errors (directory "/proc/*/" :resolve-symlinks nil))
                    when dirs return dirs)))
    (dolist (dir dirs)
      (let* ((name (car (last (pathname-directory dir))))
             (p (and (stringp name) (plusp (length name)) (every #'digit-char-p name)
                     (parse-integer name)))
             (line (and p (ignore-errors
                           (with-open-file (s (format nil "/proc/~D/stat" p)) (read-line s)))))
             ;; "pid (name) state ppid ...": the name may hold anything
             (close (and line (position #\) line :from-end t))))
        (when close
          (setf (gethash p parents)
                (ignore-errors (parse-integer line :start (+ close 4) :junk-allowed t))))))
    (labels ((below (pid)
               (loop for child being the hash-keys of parents using (hash-value parent)
                     when (eql parent pid) append (cons child (below child)))))
      (below pid))))

(defun wait-child (process &key (deadline *child-deadline*) (what "a child process"))
  "Wait for the child PROCESS (of RUN-CHILD) to end, at most DEADLINE
seconds: answers (values how code), HOW :EXITED or :SIGNALED.  At the
deadline the child is killed (SIGKILL) and reaped, and an error naming
WHAT and the deadline is signalled, so the test fails rather than hangs."
  (let ((end (+ (get-internal-real-time) (* deadline internal-time-units-per-second)))
        (pause 0.001))
    (loop
      (multiple-value-bind (how code) (ext:external-process-wait process nil)
        (when (member how '(:exited :signaled))
          (return (values how code))))
      (when (> (get-internal-real-time) end)
        (end-child process)
        (error "~A did not end within ~D s: killed" what deadline))
      (sleep pause)
      (setf pause (min 0.02 (* 2 pause))))))

(defun end-child (process)
  "Kill the child PROCESS (SIGKILL) if it still runs, with the processes it
started (a shell's commands), and reap it: what every test that starts a
child does when it leaves, however it leaves."
  (when (eq :running (ext:external-process-wait process nil))
    (dolist (pid (process-descendants (ext:external-process-pid process)))
      (kill-pid pid 9))
    (signal-process process 9)
    (ext:external-process-wait process t)))

(defun run-child (program args &rest keys &key (deadline *child-deadline*) (wait t)
                  &allow-other-keys)
  "Run PROGRAM with ARGS through EXT:RUN-PROGRAM (KEYS are its keyword
arguments, :wait aside).  With WAIT (the default) wait for it within
DEADLINE seconds (see WAIT-CHILD) and answer its exit status, or
(:signaled n) when a signal ended it; without, answer the started process
and the stream of its input (with :input :stream), to be ended with
WAIT-CHILD."
  (let ((keys (loop for (k v) on keys by #'cddr
                    unless (member k '(:deadline :wait)) append (list k v))))
    (multiple-value-bind (stream code process)
        (apply #'ext:run-program program args :wait nil keys)
      (declare (ignore code))
      (if wait
          (multiple-value-bind (how code)
              (unwind-protect
                   (progn (when (streamp stream) (ignore-errors (close stream)))
                          (wait-child process :deadline deadline
                                              :what (format nil "~A~{ ~A~}" program args)))
                (end-child process))
            (if (eq how :exited) code (list how code)))
          (values process stream)))))

(defun entry-names (dir)
  "The names in the directory DIR, in byte order."
  (mapcar #'car (rontolisp::directory-entries dir)))

(defun wait-for-entry (dir test process &key (deadline 120))
  "Wait until an entry of the directory DIR satisfies TEST (a function of
its name) while PROCESS runs, at most DEADLINE seconds; answers the name, or
NIL when PROCESS ended or the deadline passed first."
  (let ((end (+ (get-internal-real-time) (* deadline internal-time-units-per-second))))
    (loop
      (let ((found (find-if test (ignore-errors (entry-names dir)))))
        (cond (found (return found))
              ((or (not (eq :running (ext:external-process-wait process nil)))
                   (> (get-internal-real-time) end))
               (return nil))))
      (sleep 0.002))))

(defun interrupt-once-entry-appears (process dir test signal what)
  "In a test: wait until an entry of DIR satisfies TEST while PROCESS runs
(WAIT-FOR-ENTRY), then send PROCESS the signal number SIGNAL and check that
it ends with 128 + SIGNAL.  WHAT names the process in the messages.
Answers true when the entry appeared."
  (let ((found (wait-for-entry dir test process)))
    (is-true found "~A: nothing expected appeared in ~A" what dir)
    (when found
      (is (signal-process process signal))
      (multiple-value-bind (how code)
          (wait-child process :deadline 60 :what (format nil "~A after a signal" what))
        (is (eq :exited how))
        (is (eql (+ 128 signal) code))))
    found))

(defun dead-pid ()
  "The process id of a child that has ended and been reaped (for a file
named after a process that is gone)."
  (let* ((p (run-child "/bin/sh" '("-c" "exit 0") :input nil :output nil :error nil :wait nil))
         (pid (ext:external-process-pid p)))
    (wait-child p :deadline 30 :what "sh -c 'exit 0'")
    pid))

(defun run-exe (args &key (input ""))
  "Run the rontolisp executable with ARGS (strings), INPUT (a string) on its
standard input; answer (values exit-status stdout stderr)."
  (let ((in (write-file-string (tmp-path "in") input))
        (out (tmp-path "out"))
        (err (tmp-path "err")))
    (unwind-protect
         (let ((code (run-child *exe* args :input in :output out :error err
                                           :if-output-exists :supersede
                                           :if-error-exists :supersede)))
           (values code (read-file-string out) (read-file-string err)))
      (dolist (f (list in out err)) (ignore-errors (delete-file f))))))

(defun run-exe-octets (args)
  "Run the rontolisp executable with ARGS (strings, or octet vectors for
arguments that are not UTF-8) and nothing on its standard input; answer
(values exit-status stdout-octets stderr-octets), the output as bytes."
  (let ((out (tmp-path "out")) (err (tmp-path "err")))
    (unwind-protect
         (let ((code (run-child *exe* (mapcar #'octets-arg args)
                                :input nil :output out :error err
                                :if-output-exists :supersede
                                :if-error-exists :supersede)))
           (values code (file-octets out) (file-octets err)))
      (ignore-errors (delete-file out))
      (ignore-errors (delete-file err)))))

(defun octets-arg (arg)
  "ARG as a string ECL's run-program passes byte for byte: octets become
the Latin-1 characters of those bytes, which run-program writes as they
are; a string stays as it is (and must then be ASCII)."
  (if (stringp arg) arg (map 'string #'code-char arg)))

(defun octets (&rest parts)
  "The bytes of PARTS in order: a string gives its characters' codes (ASCII
only), an integer is one byte, a vector of bytes is itself."
  (let ((out (make-array 0 :element-type '(unsigned-byte 8) :adjustable t :fill-pointer 0)))
    (dolist (p parts (coerce out '(simple-array (unsigned-byte 8) (*))))
      (etypecase p
        (integer (vector-push-extend p out))
        (string (loop for c across p do (vector-push-extend (char-code c) out)))
        (vector (loop for b across p do (vector-push-extend b out)))))))

(defun octets-search (needle haystack)
  "The position of the bytes NEEDLE in the bytes HAYSTACK, or NIL."
  (search needle haystack :test #'=))

(defun sh (script &rest args)
  "Run SCRIPT with /bin/sh, $0 the executable under test and $1... ARGS;
answer (values exit-status stdout stderr)."
  (let ((out (tmp-path "sh-out")) (err (tmp-path "sh-err")))
    (unwind-protect
         (let ((code (run-child "/bin/sh" (list* "-c" script *exe* args)
                                :input nil :output out :error err
                                :if-output-exists :supersede
                                :if-error-exists :supersede)))
           (values code (read-file-string out) (read-file-string err)))
      (ignore-errors (delete-file out))
      (ignore-errors (delete-file err)))))

(defun split-lines (string)
  "The lines of STRING, without their newlines (no empty last line)."
  (loop with start = 0
        for nl = (position #\Newline string :start start)
        while (or nl (< start (length string)))
        collect (subseq string start nl)
        while nl
        do (setf start (1+ nl))))

(defun contains (haystack needle)
  (and (search needle haystack) t))

(defun ci-p ()
  "True in a CI run (CI=true in the environment), where every comparison
with a reference must run."
  (equal (ext:getenv "CI") "true"))

(defun skip-reference (control &rest args)
  "Say that a comparison with a reference (llama.cpp's libraries, a tool
built from them) cannot run because the reference is missing, CONTROL and
ARGS saying which: a skip, or under CI=true (see CI-P) a failure."
  (if (ci-p)
      (fail "CI=true and a reference is missing: ~?" control args)
      (skip "~?" control args)))

(defmacro skip-unless-file ((path) &body body)
  "Run BODY when PATH, a file made or fetched outside the repository (a
built program, a downloaded reference), exists; otherwise say the test is
skipped (a skip is not a pass), or under CI=true fail (see SKIP-REFERENCE).
A file git tracks takes WITH-TRACKED-FIXTURE instead."
  `(if (probe-file ,path)
       (progn ,@body)
       (skip-reference "missing test file ~A" ,path)))

(defmacro with-tracked-fixture ((path) &body body)
  "Run BODY when PATH, a fixture git tracks (under tests/golden/ or
tests/bad/), exists; otherwise fail the test naming PATH: a lost fixture
is a failure, never a skip."
  `(if (probe-file ,path)
       (progn ,@body)
       (fail "the tracked fixture ~A is missing (git tracks it: git checkout restores it)"
             ,path)))

;;; Under AddressSanitizer (`make check-asan').

(defun address-sanitized-p (pid)
  "True when the process PID runs under AddressSanitizer: its runtime,
libasan, is in the process's memory map (/proc/PID/maps; `make check-asan'
builds with gcc, which links it as a shared library).  Its allocator keeps
freed memory in a quarantine on purpose, so a bound on resident memory
means nothing there."
  (with-open-file (s (format nil "/proc/~D/maps" pid))
    (loop for line = (read-line s nil)
          while line
          thereis (search "/libasan.so" line))))

;;; Growth, not seconds: a test of an algorithm's cost compares its
;;; processor time at two sizes, which holds on a loaded machine and under
;;; the sanitizers, where any fixed limit in seconds fails.

(defun child-cpu-seconds (script &rest args)
  "The CPU seconds (user and system) the commands of SCRIPT (sh, $0 the
executable, $1... ARGS) took, read from sh's `times'; their output is
discarded.  The second value is the exit status of SCRIPT's last command."
  (multiple-value-bind (code out)
      (apply #'sh (format nil "~A >/dev/null 2>&1; s=$?; times; exit $s" script) args)
    (let ((children (second (split-lines out))))
      ;; "0m1.234s 0m0.056s": minutes and seconds, user then system
      (values
       (loop for field in (list (subseq children 0 (position #\Space children))
                                (subseq children (1+ (position #\Space children))))
             sum (let ((m (position #\m field)))
                   (+ (* 60 (parse-integer field :end m))
                      (let ((*read-default-float-format* 'double-float))
                        (read-from-string (subseq field (1+ m) (1- (length field))))))))
       code))))

(defun run-seconds (thunk)
  "The processor seconds this process spent calling THUNK."
  (let ((start (get-internal-run-time)))
    (funcall thunk)
    (/ (- (get-internal-run-time) start) internal-time-units-per-second)))

;;; Golden files: their JSON dumps (made by gguf-py, see tests/golden/README.md)
;;; and raw tensor bytes read at the offsets the dumps give, so the tests of
;;; the quantizer do not depend on our own GGUF reader.

(defun golden-json (name)
  "The parsed JSON dump NAME.json of the golden file NAME (a hash table)."
  (with-open-file (s (golden (concatenate 'string name ".json")) :external-format :utf-8)
    (let ((*read-default-float-format* 'double-float)) ; JSON numbers are doubles
      (yason:parse s))))

(defun json-tensors (json)
  (gethash "tensors" json))

(defun json-tensor (json name)
  (find name (json-tensors json) :key (lambda (h) (gethash "name" h)) :test #'string=))

(defun read-octets (path start count)
  (with-open-file (s path :element-type '(unsigned-byte 8))
    (file-position s start)
    (let ((v (make-array count :element-type '(unsigned-byte 8))))
      (assert (= count (read-sequence v s)))
      v)))

(defun file-octets (path)
  "Every byte of the file at PATH."
  (read-octets path 0 (with-open-file (s path :element-type '(unsigned-byte 8)) (file-length s))))

(defun golden-tensor-octets (name json tensor)
  (read-octets (golden name)
               (+ (gethash "data_offset" json) (gethash "offset" tensor))
               (gethash "nbytes" tensor)))

;;; The goldens of every other quant type (tests/golden/quants/README.md).

(defparameter *quant-golden-ftypes*
  '("q4_0" "q4_1" "q5_0" "q5_1" "q2_k" "q3_k_s" "q3_k_m" "q3_k_l" "q4_k_s" "q4_k_m"
    "q5_k_s" "q5_k_m" "q6_k" "iq4_nl" "iq4_xs")
  "The ftypes tests/golden/quants/ holds an output of, as the file names spell them.")

(defun quant-golden-files ()
  "Every GGUF file of tests/golden/quants/ by name: the two inputs and their
outputs for every ftype."
  (loop for input in '("quant_main" "quant_odd")
        collect (format nil "quants/~A.f32.gguf" input)
        append (loop for ftype in *quant-golden-ftypes*
                     collect (format nil "quants/~A.~A.gguf" input ftype))))

(defun tensor-rows-cols (tensor)
  "A golden tensor's shape as (rows cols): cols = ne[0], rows the rest."
  (let ((ne (gethash "ne" tensor)))
    (list (reduce #'* (rest ne)) (first ne))))

(defun octets-u16 (octets)
  (let ((v (make-array (floor (length octets) 2) :element-type '(unsigned-byte 16))))
    (dotimes (i (length v) v)
      (setf (aref v i) (logior (aref octets (* 2 i)) (ash (aref octets (1+ (* 2 i))) 8))))))

(defun octets-f32 (octets)
  (let ((v (make-array (floor (length octets) 4) :element-type 'single-float)))
    (dotimes (i (length v) v)
      (let ((bits (logior (aref octets (* 4 i)) (ash (aref octets (+ 1 (* 4 i))) 8)
                          (ash (aref octets (+ 2 (* 4 i))) 16) (ash (aref octets (+ 3 (* 4 i))) 24))))
        (setf (aref v i) (rontolisp::%bits-single bits))))))

(defun reshape (vector dims)
  "A fresh simple array of DIMS with VECTOR's elements in row-major order."
  (let ((a (make-array dims :element-type (array-element-type vector))))
    (dotimes (i (length vector) a)
      (setf (row-major-aref a i) (aref vector i)))))

(defun golden-source-array (name json tensor)
  "The golden tensor as the array QUANTIZE takes: a (rows cols) single-float
array for F32, a float16-array or bfloat16-array for F16 and BF16."
  (let ((octets (golden-tensor-octets name json tensor))
        (dims (tensor-rows-cols tensor)))
    (ecase (gethash "type_id" tensor)
      (0 (reshape (octets-f32 octets) dims))
      (1 (rontolisp::%make-float16-array (reshape (octets-u16 octets) dims)))
      (30 (rontolisp::%make-bfloat16-array (reshape (octets-u16 octets) dims))))))

(defun matrix-octets (m)
  "The bytes WRITE-SEQUENCE writes for the quantized matrix M, through a
temporary file."
  (let ((path (tmp-path "qm.bin")))
    (unwind-protect
         (progn
           (with-open-file (s path :direction :output :element-type '(unsigned-byte 8)
                                   :if-exists :supersede)
             (write-sequence m s))
           (with-open-file (s path :element-type '(unsigned-byte 8))
             (let ((v (make-array (file-length s) :element-type '(unsigned-byte 8))))
               (read-sequence v s)
               v)))
      (ignore-errors (delete-file path)))))

;;; gguf-py's names for GGUF value types, and the bad-file corpus: for the
;;; GGUF reader's tests and inspect's.

(defparameter *gguf-py-types*
  '(("UINT8" . "u8") ("INT8" . "i8") ("UINT16" . "u16") ("INT16" . "i16")
    ("UINT32" . "u32") ("INT32" . "i32") ("FLOAT32" . "f32") ("BOOL" . "bool")
    ("STRING" . "string") ("ARRAY" . "array") ("UINT64" . "u64") ("INT64" . "i64")
    ("FLOAT64" . "f64")))

(defun our-type-name (gguf-py-name)
  (cdr (assoc gguf-py-name *gguf-py-types* :test #'string=)))

(defun bad-corpus ()
  (directory (merge-pathnames "tests/bad/*.gguf" *root*)))

;;; GGUF files built byte by byte, independent of our writer, so that keys,
;;; strings and names can hold any bytes (invalid UTF-8 included).

(defun single-bits (x)
  "The IEEE binary32 bits of the single-float X (zero or normal)."
  (if (zerop x)
      (if (minusp (float-sign x)) #x80000000 0)
      (multiple-value-bind (mantissa exponent sign) (integer-decode-float x)
        (logior (if (minusp sign) #x80000000 0)
                (ash (+ exponent 150) 23)
                (ldb (byte 23 0) mantissa)))))

(defun le-octets (n bytes)
  "The integer N (two's complement when negative) as BYTES little-endian bytes."
  (loop for i below bytes collect (ldb (byte 8 (* 8 i)) n)))

(defun gguf-string-octets (octets)
  (append (le-octets (length octets) 8) (coerce octets 'list)))

(defun gguf-value-octets (value)
  "VALUE as (type-id . bytes): (:u32 n), (:f32 x), (:string octets),
(:array element-type value-spec...) with each value-spec one of these."
  (destructuring-bind (kind &rest args) value
    (ecase kind
      (:u32 (cons 4 (le-octets (first args) 4)))
      (:f32 (cons 6 (le-octets (single-bits (first args)) 4)))
      (:string (cons 8 (gguf-string-octets (first args))))
      (:array
       (destructuring-bind (elem &rest items) args
         (let ((elem-id (ecase elem (:u32 4) (:f32 6) (:string 8) (:array 9))))
           (cons 9 (append (le-octets elem-id 4) (le-octets (length items) 8)
                           (loop for item in items
                                 append (cdr (gguf-value-octets item)))))))))))

(defun raw-gguf (&key kvs tensors)
  "A GGUF v3 file as bytes (alignment 32, no general.alignment key, no
padding after the header when there are no tensors) and, as
second value, the bytes of its key-value section (from byte 24).  KVS is a
list of (key-octets value-spec) (see GGUF-VALUE-OCTETS); TENSORS a list of
(name-octets ggml-dims single-float-vector), written F32."
  (let* ((kv-bytes (loop for (key value) in kvs
                         for (id . bytes) = (gguf-value-octets value)
                         append (append (gguf-string-octets key) (le-octets id 4) bytes)))
         (offset 0)
         (infos (loop for (name dims data) in tensors
                      append (append (gguf-string-octets name) (le-octets (length dims) 4)
                                     (loop for d in dims append (le-octets d 8))
                                     (le-octets 0 4) (le-octets offset 8))
                      do (incf offset (* 32 (ceiling (* 4 (length data)) 32)))))
         (head (append (coerce (octets "GGUF") 'list) (le-octets 3 4)
                       (le-octets (length tensors) 8) (le-octets (length kvs) 8)
                       kv-bytes infos))
         ;; padded to the data section only when there is one, as our writer does
         (head (if tensors
                   (append head (make-list (mod (- (length head)) 32) :initial-element 0))
                   head))
         (data (loop for (nil nil values) in tensors
                     for bytes = (loop for x across values
                                       append (le-octets (single-bits x) 4))
                     append (append bytes (make-list (mod (- (length bytes)) 32)
                                                     :initial-element 0)))))
    (values (coerce (append head data) '(simple-array (unsigned-byte 8) (*)))
            (coerce kv-bytes '(simple-array (unsigned-byte 8) (*))))))

(defun write-octets-file (path octets)
  "Write the bytes OCTETS to PATH (replacing it); answers PATH."
  (with-open-file (s path :direction :output :if-exists :supersede
                          :element-type '(unsigned-byte 8))
    (write-sequence octets s))
  path)

;;; Random test data.

(defun random-matrix (rows cols &key (scale 1.0) (state (make-random-state t)))
  (let ((a (make-array (list rows cols) :element-type 'single-float)))
    (dotimes (i (array-total-size a) a)
      (setf (row-major-aref a i) (* scale (- (random 2.0 state) 1.0))))))

(defun vec-random-matrix (rows cols scale state)
  (random-matrix rows cols :scale scale :state state))

(defun vec-random-vector (n scale state &optional (type 'single-float))
  (let ((v (make-array n :element-type type)))
    (dotimes (i n v)
      (setf (aref v i) (coerce (* scale (- (random 2.0 state) 1.0)) type)))))

;;; Bytes that are not UTF-8, one of each kind, and a GGUF file whose keys,
;;; strings, token array and tensor name hold them.

(defparameter *invalid-utf8*
  (list (octets #x80)                   ; a lone continuation byte
        (octets #xc0 #xaf)              ; an overlong '/'
        (octets #xe0 #x80 #xaf)         ; an overlong three-byte form
        (octets #xed #xa0 #x80)         ; an encoded surrogate
        (octets #xed #xb2 #x80)         ; the surrogate U+DC80 itself, encoded
        (octets #xe2 #x82)              ; a sequence cut short
        (octets #xf4 #x90 #x80 #x80)    ; above U+10FFFF
        (octets #xff))                  ; never a UTF-8 byte
  "Byte strings that are not UTF-8, one per kind of invalid sequence.")

(defparameter *invalid-utf8-tensor-name* (octets "blk.0.ffn" #xff ".weight"))

(defun invalid-utf8-gguf ()
  "A GGUF file (bytes, and its key-value section as second value) whose keys,
string values, token array and tensor name hold every kind of byte sequence
that is not UTF-8; its tokens differ only in those bytes."
  (raw-gguf
   :kvs `((,(octets "general.name") (:string ,(octets "m" #xff "x")))
          ,@(loop for bad in *invalid-utf8* for i from 0
                  collect `(,(octets "test.key" (format nil "~D." i) bad)
                            (:string ,(octets "v" bad "w"))))
          (,(octets "tokenizer.ggml.tokens")
           (:array :string (:string ,(octets "a"))
                   ,@(loop for bad in *invalid-utf8* collect `(:string ,(octets "a" bad)))
                   (:string ,(octets "a" #xc3 #xa9)))))
   :tensors `((,*invalid-utf8-tensor-name* (32 2)
               ,(make-array 64 :element-type 'single-float :initial-element 0.5)))))

(defun nested-arrays-gguf ()
  "A GGUF file (bytes) with arrays of arrays: of floats (one inner array
empty), of strings, empty, of one empty u32 array, and of inner arrays of
different element types."
  (raw-gguf :kvs `((,(octets "n.f32") (:array :array (:array :f32 (:f32 1.5) (:f32 -2.0))
                                              (:array :f32)))
                   (,(octets "n.str") (:array :array (:array :string (:string ,(octets "a\"b")))))
                   (,(octets "n.empty") (:array :array))
                   (,(octets "n.empty-inner") (:array :array (:array :u32)))
                   (,(octets "n.mixed") (:array :array (:array :u32 (:u32 7))
                                                (:array :string (:string ,(octets "s")))
                                                (:array :array (:array :f32 (:f32 0.5))))))))

;;; Pictures (--svg FILE): read back as XML by tests/ref/svg-check.py, and
;;; drawn by a headless chromium, in whose screenshot each series' colour
;;; must show inside the plotting areas.

(defparameter *chromium-deadline* 120
  "Seconds headless chromium may take to draw one SVG to a PNG.")

(defun svg-report (svg &optional png)
  "tests/ref/svg-check.py's report on the file SVG (with PNG, its rendering,
the pixels of each series' colour too): a hash table, or NIL after a
failed check naming what went wrong."
  (let ((out (tmp-path "svg-report.json")) (err (tmp-path "svg-report.err")))
    (unwind-protect
         (let ((code (run-child "/bin/sh" (list* "-c" "exec python3 \"$@\"" "sh"
                                                 (namestring (merge-pathnames "tests/ref/svg-check.py" *root*))
                                                 svg (and png (list png)))
                                :input nil :output out :error err
                                :if-output-exists :supersede :if-error-exists :supersede)))
           (if (eql code 0)
               (with-open-file (s out) (yason:parse s))
               (progn (fail "svg-check.py ~A: exit ~A: ~A" svg code (read-file-string err)) nil)))
      (ignore-errors (delete-file out))
      (ignore-errors (delete-file err)))))

(defun chromium-program ()
  "The chromium to draw with: $RL_CHROMIUM, else chromium on PATH; NIL when
there is none."
  (multiple-value-bind (code out)
      (sh "for p in \"$RL_CHROMIUM\" chromium; do
             [ -n \"$p\" ] && command -v \"$p\" 2>/dev/null && exit 0
           done; exit 1")
    (and (eql code 0) (first (split-lines out)))))

(defun render-svg (svg width height)
  "The PNG headless chromium draws of the file SVG in a window WIDTH x
HEIGHT (its own size), at a fresh temporary path (the caller deletes it),
or NIL after a skip (no chromium; under CI=true a failure) or a failed
check."
  (let ((chromium (chromium-program)))
    (if (null chromium)
        (progn (skip-reference "no chromium to draw ~A (install Debian's chromium)" svg) nil)
        (let ((png (tmp-path "picture.png")) (profile (tmp-path "chromium-profile"))
              (log (tmp-path "chromium.log")))
          (unwind-protect
               (let ((code (run-child chromium
                                      (list "--headless=new" "--no-sandbox" "--disable-gpu"
                                            (format nil "--user-data-dir=~A" profile)
                                            (format nil "--screenshot=~A" png)
                                            (format nil "--window-size=~D,~D" width height)
                                            svg)
                                      :input nil :output log :error :output
                                      :if-output-exists :supersede
                                      :deadline *chromium-deadline*)))
                 (cond ((and (eql code 0) (probe-file png)) png)
                       (t (fail "chromium drew no ~A of ~A (exit ~A): ~A" png svg code
                                (read-file-string log))
                          nil)))
            (sh "rm -rf \"$1\" \"$2\"" profile log))))))

(defun check-svg-picture (svg &key series panels texts)
  "Check the picture SVG: XML with finite coordinates, no script, image or
external reference; each name of SERIES drawn (a mark, line or bar) and in
the legend; each of PANELS a panel's title; each of TEXTS a text of it.
Then draw it with chromium (RENDER-SVG) and find each series' colour
inside the plotting areas (each series in sight: not every mark of it
under a later series' mark).  Answers the report (SVG-REPORT) or NIL."
  (is (probe-file svg) "no picture at ~A" svg)
  (let ((report (and (probe-file svg) (svg-report svg))))
    (when report
      (is (null (gethash "bad_numbers" report)) "~A: coordinates that are not finite numbers: ~S"
          svg (gethash "bad_numbers" report))
      (is (zerop (gethash "scripts" report)) "~A holds a script or an image" svg)
      (is (null (gethash "external" report)) "~A refers outside itself: ~S" svg (gethash "external" report))
      (let ((drawn (gethash "series" report)))
        (dolist (name series)
          (let ((s (gethash name drawn)))
            (is (and s (plusp (+ (gethash "marks" s) (gethash "lines" s) (gethash "bars" s))))
                "~A: the series ~S is not drawn (series: ~{~S~^ ~})" svg name
                (loop for k being the hash-keys of drawn collect k))
            (is (member name (gethash "legend" report) :test #'equal)
                "~A: ~S missing from the legend ~S" svg name (gethash "legend" report)))))
      (let ((titles (mapcar (lambda (p) (gethash "title" p)) (gethash "panels" report))))
        (dolist (title panels)
          (is (member title titles :test #'equal) "~A: no panel ~S among ~S" svg title titles)))
      (dolist (text texts)
        (is (member text (gethash "texts" report) :test #'equal)
            "~A: no text ~S" svg text))
      (let ((png (render-svg svg (round (gethash "width" report)) (round (gethash "height" report)))))
        (when png
          (unwind-protect
               (let ((pixels (gethash "pixels" (svg-report svg png)))
                     (drawn (gethash "series" report)))
                 (is (some (lambda (name) (gethash "in_sight" (gethash name drawn))) series)
                     "~A: every series is under another's marks" svg)
                 ;; a series whose every mark lies under a later one (equal
                 ;; times, say) cannot show its colour
                 (dolist (name (remove-if-not (lambda (name)
                                                (let ((s (gethash name drawn)))
                                                  (and s (gethash "in_sight" s))))
                                              series))
                   (is (and pixels (<= 5 (gethash name pixels 0)))
                       "~A drawn by chromium: ~D pixels of the series ~S in the plotting areas"
                       svg (and pixels (gethash name pixels 0)) name)))
            (ignore-errors (delete-file png))))))
    report))
