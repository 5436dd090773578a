;;;; quantize-tool.lisp - `rontolisp quantize IN.gguf OUT.gguf TYPE': a GGUF
;;;; file quantized as llama-quantize does it for the file type TYPE (every
;;;; one it makes without an importance matrix; the per-tensor rules are in
;;;; quantize-mixtures.lisp, in words in doc/command-line.md section 3).
;;;;
;;;; The output's tensors have the types and the exact bytes llama-quantize
;;;; writes (tests/golden/README.md rules 1-8, tests/golden/quants/): the
;;;; same choice of tensors and types, the fall backs for rows that do not
;;;; split into a type's blocks, the
;;;; same tensor order (layer, then name) and n_dims (trailing 1s dropped),
;;;; and general.quantization_version / general.file_type as the last two
;;;; keys.  One deliberate difference: the input's general.alignment is
;;;; honoured, where llama-quantize lays every file out at 32.  A file
;;;; without the key is written without it (alignment 32), so for such files
;;;; the whole output equals llama-quantize's byte for byte.
;;;;
;;;; Input values are checked as llama.cpp's loader checks them: a NaN or
;;;; infinity anywhere refuses the file, as does a Q8_0 scale or an F16
;;;; fall-back value that overflows binary16.  Nothing is written then.
;;;;
;;;; The output is streamed: every tensor's type and size are decided first
;;;; (the plan), the header goes out, then each tensor is read, converted on
;;;; the thread pool and written a few MiB at a time, the input's pages
;;;; released as they are used (gguf:stream-put-tensor), so memory holds one
;;;; piece, not the model.  The options are llama-quantize's everyday ones.

(in-package "COMMAND-LINE")

(defun tensor-layer (name)
  "The N of a name starting `blk.N.', else -1 (llama.cpp's
weight_name_comparer reads it with sscanf \"blk.%d.\")."
  (if (and (> (length name) 4) (string= "blk." name :end2 4))
      (multiple-value-bind (n end) (parse-integer name :start 4 :junk-allowed t)
        (declare (ignore end))
        (or n -1))
      -1))

(defun octets< (a b)
  "True when the byte vector A sorts before B as C's strcmp sorts them."
  (let ((m (mismatch a b)))
    (and m (or (= m (length a))
               (and (< m (length b)) (< (aref a m) (aref b m)))))))

(defun llama-tensor-order (names)
  "NAMES sorted as llama.cpp's model loader orders tensors: by layer number
(names without `blk.N.' count as -1 and come first), then by name as bytes
(std::string's order: the same as the characters' for UTF-8, but a byte
that is not UTF-8, held as U+DC80..U+DCFF, sorts by its own value)."
  (mapcar #'first
          (stable-sort (mapcar (lambda (n) (list n (tensor-layer n) (%utf8-octets n))) names)
                       (lambda (a b)
                         (destructuring-bind (na la oa) a
                           (declare (ignore na))
                           (destructuring-bind (nb lb ob) b
                             (declare (ignore nb))
                             (if (/= la lb) (< la lb) (octets< oa ob))))))))

;;; Values and shapes.

(defun reshape-2d (data rows cols)
  "DATA (a simple single-float array or half array) as a fresh rank-2
array of ROWS x COLS with the same row-major elements (a copy)."
  (flet ((copy (src type)
           (let ((dst (make-array (list rows cols) :element-type type)))
             (replace (make-array (* rows cols) :element-type type :displaced-to dst)
                      (make-array (* rows cols) :element-type type :displaced-to src))
             dst)))
    (etypecase data
      ((simple-array single-float) (copy data 'single-float))
      (float16-array (%make-float16-array (copy (half-array-bits data) '(unsigned-byte 16))))
      (bfloat16-array (%make-bfloat16-array (copy (half-array-bits data) '(unsigned-byte 16)))))))

(defun data-as-matrix (data ne)
  "DATA as a rank-2 array of (rows cols), cols = ne[0]: the form QUANTIZE
takes for a tensor of any rank."
  (let ((cols (first ne))
        (rows (reduce #'* (rest ne))))
    (if (equal (packed-dimensions data) (list rows cols))
        data
        (reshape-2d data rows cols))))

(defun convert-tensor-data (data type &key outliers)
  "DATA (an F32, F16 or BF16 array) as TYPE (:f32 :f16 :bf16 :q8_0), itself
when it is already of that type; other conversions go through f32, rounding
to nearest even (the conversions llama.cpp's tools make).  OUTLIERS, input
columns of a matrix made :q8_0, get the outlier-aware scales of doc/outliers.md."
  (flet ((single () (if (arrayp data) data (half-array-to-single data))))
    (ecase type
      (:f32 (single))
      (:f16 (if (float16-array-p data) data (make-float16-array (single))))
      (:bf16 (if (bfloat16-array-p data) data (make-bfloat16-array (single))))
      (:q8_0 (quantize data 'q8-0 :outliers outliers)))))

;;; The conversion.


(defmacro with-tensor-named ((path name-place) &body body)
  "Run BODY, the work on the tensors of the file PATH: an error it signals
that names no file (a type error, an exhausted heap, one of rontolisp's own
about an array) becomes TENSOR-DATA-ERROR naming the file and the tensor
NAME-PLACE holds at the time, when it holds one."
  (let ((c (gensym "C")))
    `(handler-bind ((error (lambda (,c)
                             (when (and ,name-place
                                        (not (typep ,c '(or tensor-data-error gguf:gguf-error
                                                         file-io-error))))
                               (tensor-data-error ,path ,name-place "cannot be converted: ~A"
                                                  (condition-line ,c))))))
       ,@body)))

;;; The target types.

(defun target-type-id (string &key ftype)
  "The ggml type id of the tensor type STRING (a ggml type name quantize
writes, any case: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K
Q5_K Q6_K IQ4_NL IQ4_XS); with FTYPE, STRING is a file type instead (a
name or ftype number of *QUANTIZE-FTYPES*) and the answer its main type.
Anything else is a USAGE-ERROR that names it."
  (if ftype
      (ggml-id (third (find-ftype string)))
      (let ((names (mapcar #'%ggml-type (quantize-write-types))))
        (cond ((find string names :test #'string-equal)
               (nth (position string names :test #'string-equal) (quantize-write-types)))
              ((find-ggml-type string)
               (usage-error "~A: expected one of ~{~A~^ ~}, found a type rontolisp quantize ~
does not write" (string-upcase string) names))
              (t (usage-error "expected a type ~{~A~^ ~}, found ~S" names string))))))

(defun target-type-name (id)
  (%ggml-type id))

(defun parse-tensor-type-rule (string)
  "A --tensor-type PATTERN=TYPE argument as llama-quantize reads it: the
pattern before the first `=', lower-cased, and the type after it.  Answers
(pattern . type-id); a malformed rule is a USAGE-ERROR."
  (let ((sep (position #\= string)))
    (cond ((null sep) (usage-error "malformed tensor type ~S: expected PATTERN=TYPE" string))
          ((zerop sep) (usage-error "missing tensor name in ~S: expected PATTERN=TYPE" string))
          ((= sep (1- (length string)))
           (usage-error "missing quantization type in ~S: expected PATTERN=TYPE" string)))
    (let ((pattern (string-downcase (subseq string 0 sep))))
      (regex-parser "--tensor-type" pattern)
      (cons pattern (target-type-id (subseq string (1+ sep)))))))

(defun tensor-type-rule-for (name rules)
  "The type id of the first of RULES ((pattern . type-id) ...) whose
pattern (a string or a compiled REGEX) occurs in the tensor NAME, searched
as llama-quantize's std::regex_search does, or NIL."
  (loop for (pattern . id) in rules
        when (regex-search pattern name)
          return id))

(defun quantize-target (name ne source main &key pure output-type token-embedding-type rules
                                                mixture leave-output)
  "The ggml type id quantize writes the tensor NAME of dims NE and type id
SOURCE in, for the main type id MAIN, as llama-quantize's
llama_tensor_get_type chooses it: a tensor quantize leaves alone keeps
SOURCE (output.weight too with LEAVE-OUTPUT); the token embeddings take
TOKEN-EMBEDDING-TYPE and output.weight OUTPUT-TYPE when given; a float
MAIN is the type of the rest; a quantized MAIN is overridden by the first
of RULES whose pattern occurs in the name, else, unless PURE, by the
per-tensor rules of the MIXTURE (MIXTURE-TYPE; it advances its counts);
then a type whose block does not divide the rows falls back (TYPE-FALLBACK).
Answers the type id and whether it is a fall back."
  (flet ((fit (type)
           (if (quantized-type-p type) (type-fallback type (first ne)) (values type nil))))
    (cond ((not (quantizable-tensor-p name ne :leave-output leave-output)) (values source nil))
          ((and token-embedding-type
                (eq (tensor-category name) :token-embd)
                (not (and (string= name "per_layer_token_embd.weight")
                          (tensor-type-rule-for name rules))))
           (fit token-embedding-type))
          ((and output-type (string= name "output.weight")) (fit output-type))
          ((not (quantized-type-p main)) (values main nil))
          (t (fit (or (tensor-type-rule-for name rules)
                      (if (or pure (null mixture))
                          main
                          (mixture-type mixture main name ne :output-type output-type
                                                             :token-embedding-type
                                                             token-embedding-type))))))))

;;; The plan: every tensor's type and size, before any data is read.

(defstruct (planned (:constructor make-planned (name info ne source target fallback file))
                    (:copier nil) (:predicate nil))
  name info ne source target fallback file)

(defun planned-bytes (p type)
  (multiple-value-bind (name block-size block-bytes) (%ggml-type type)
    (declare (ignore name))
    (* (/ (reduce #'* (planned-ne p)) block-size) block-bytes)))

(defun quantize-targets (files order main options)
  "A table of tensor name -> (target fallback) for the tensors of FILES
(the open GGUF files of a set), decided in the ORDER of their names (the
order llama-quantize decides them in: the mixture's counts run in it)."
  (let ((table (make-hash-table :test 'equal))
        (infos (make-hash-table :test 'equal)))
    (dolist (f files)
      (dolist (name (gguf:tensor-names f))
        (setf (gethash name infos) (gguf:tensor-info f name))))
    (dolist (name order table)
      (let ((info (gethash name infos)))
        (setf (gethash name table)
              (multiple-value-list
               (apply #'quantize-target name (gguf:tensor-info-dims info)
                      (gguf:tensor-info-type-id info) main options)))))))

(defun quantize-plan (f names targets path &key allow-requantize)
  "The PLANNED of each tensor of F in the order NAMES, their types from
TARGETS (QUANTIZE-TARGETS); a tensor whose type quantize cannot convert
(a quantized one without ALLOW-REQUANTIZE, as llama-quantize refuses it by
default, or one of a type it cannot read) signals TENSOR-DATA-ERROR
naming PATH, and so does a tensor of no elements (a dimension of 0), which
has no rows to convert or copy."
  (loop for name in names
        collect (let* ((info (gguf:tensor-info f name))
                       (ne (gguf:tensor-info-dims info))
                       (source (gguf:tensor-info-type-id info)))
                  (when (member 0 ne)
                    (tensor-data-error path name "has dimensions [~{~D~^, ~}]: expected at least ~
one element in each dimension to convert or copy it, found none" ne))
                  (destructuring-bind (target fallback) (gethash name targets)
                    (cond ((or (= target source) (float-type-id-p source)))
                          ((not (quantized-type-p source))
                           (tensor-data-error path name "has type ~A: expected F32, F16, BF16 or ~
a quantized type quantize reads (~{~A~^ ~}) to convert it to ~A"
                                              (gguf:tensor-info-type info)
                                              (mapcar #'%ggml-type
                                                      (remove-if-not #'quantized-type-p
                                                                     (quantize-write-types)))
                                              (target-type-name target)))
                          ((not allow-requantize)
                           (tensor-data-error path name "has type ~A: expected F32, F16 or BF16 ~
data to quantize to ~A; add --allow-requantize to dequantize it and quantize it again (as ~
llama-quantize asks; the errors of the two quantizations add up)"
                                              (gguf:tensor-info-type info) (target-type-name target))))
                    (make-planned name info ne source target fallback f)))))

;;; The conversion.

(defun size-string (bytes)
  "BYTES in the binary unit that fits, three significant digits: \"0 B\",
\"512 B\", \"12.5 KiB\", \"3.20 MiB\", \"1.50 GiB\" (never \"0.00 MiB\")."
  (if (< bytes 1024)
      (format nil "~D B" bytes)
      (let* ((units '("KiB" "MiB" "GiB" "TiB" "PiB"))
             (power (min (length units) (floor (log bytes 1024))))
             (value (/ bytes (expt 1024d0 power))))
        ;; 1023.9 KiB rounds to 1024 KiB: say 1.00 MiB instead
        (when (and (>= (round value) 1024) (< power (length units)))
          (incf power)
          (setf value (/ value 1024)))
        (if (< value 99.95d0)
            (format nil "~,vF ~A" (if (< value 9.995d0) 2 1) value (nth (1- power) units))
            (format nil "~D ~A" (round value) (nth (1- power) units))))))

(defun quantize-summary (stream out plan seconds &key dry-run)
  "One line: tensors, the types written, the sizes before and after, bits
per weight and the time."
  (let* ((weights (reduce #'+ plan :key (lambda (p) (reduce #'* (planned-ne p)))))
         (before (reduce #'+ plan :key (lambda (p) (gguf:tensor-info-bytes (planned-info p)))))
         (after (reduce #'+ plan :key (lambda (p) (planned-bytes p (planned-target p)))))
         (types (remove-duplicates (mapcar (lambda (p) (gguf:type-name (planned-target p))) plan)
                                   :test #'string= :from-end t)))
    (format stream "~A~:[~; (dry run, nothing written)~]: ~D tensor~:P (~{~A~^, ~}~[~:;, ~:*~D ~
fall back~:P~]), ~A -> ~A, ~,2F -> ~,2F bits per weight, ~,2F s~%"
            out dry-run (length plan)
            (mapcar (lambda (ty) (format nil "~D ~A" (count ty plan :key (lambda (p) (gguf:type-name (planned-target p)))
                                                                     :test #'string=)
                                         ty))
                    types)
            (count-if #'planned-fallback plan)
            (size-string before) (size-string after)
            (if (plusp weights) (/ (* 8.0d0 before) weights) 0)
            (if (plusp weights) (/ (* 8.0d0 after) weights) 0)
            seconds)))

(defun write-plan-line (stream done total p)
  "The line of the planned tensor P, the DONE-th of TOTAL, on STREAM: its
name (escaped as inspect prints names, so that a newline in one keeps the
lines), types and sizes."
  (format stream "[~4D/~D] ~36A ~5A -> ~5A ~10@A -> ~10@A~:[~; (fall back)~]~%"
          done total (escape-control (planned-name p)) (gguf:type-name (planned-source p))
          (gguf:type-name (planned-target p))
          (size-string (gguf:tensor-info-bytes (planned-info p)))
          (size-string (planned-bytes p (planned-target p)))
          (planned-fallback p)))

(defun tensor-progress (total)
  "A function of (done planned) that prints the line of the tensor
(WRITE-PLAN-LINE) on stderr: every tensor's on a terminal, otherwise at
most one every PROGRESS-INTERVAL seconds."
  (flet ((show (done p)
           (write-plan-line *error-output* done total p)
           (finish-output *error-output*)))
    (cond ((not (plusp total)) (lambda (done p) (declare (ignore done p))))
          ((/= 0 (%isatty 2)) #'show)
          (t (progress-lines #'show)))))

(defun stream-failure (f path p status where)
  "Signal TENSOR-DATA-ERROR for the failed check STATUS at WHERE (see
GGUF:STREAM-PUT-TENSOR) of the planned tensor P of F."
  (let* ((name (planned-name p))
         (info (planned-info p))
         (cols (first (planned-ne p))))
    (cond
      ((and (eq status :non-finite) (quantized-type-p (planned-source p)))
       (tensor-data-error path name "has invalid data: expected finite values, found NaN or an ~
infinity at element ~D (its ~A blocks dequantized)" where (gguf:type-name (planned-source p))))
      ((eq status :non-finite)
        (let* ((size (if (= (planned-source p) 0) 4 2))
               (octets (gguf:tensor-octets f name))
               (bits (loop for i below size sum (ash (aref octets (+ (* where size) i)) (* 8 i))))
               (mantissa (ldb (byte (ecase (planned-source p) (0 23) (1 10) (30 7)) 0) bits)))
          (tensor-data-error path name "has invalid data: expected finite values, found ~A at ~
element ~D (byte ~D)" (if (zerop mantissa) "an infinity" "NaN") where
                             (+ (gguf:data-offset f) (gguf:tensor-info-offset info) (* where size)))))
      ((quantized-type-p (planned-target p))
       (let ((per-row (/ cols (type-block-size (planned-target p)))))
         (tensor-data-error path name "cannot be quantized: row ~D, block ~D: the ~A scale ~
overflows binary16 (quantized data validation failed, as llama-quantize)"
                            (floor where per-row) (mod where per-row)
                            (gguf:type-name (planned-target p)))))
      (t
       (tensor-data-error path name "cannot ~:[be converted to ~A~;fall back to ~A~]: element ~D ~
overflows it (quantized data validation failed, as llama-quantize)"
                          (planned-fallback p) (gguf:type-name (planned-target p)) where)))))

(defun parse-kv-override (string)
  "A --override-kv KEY=TYPE:VALUE argument as llama-quantize reads it (TYPE
int, float, bool or str) as the metadata entry llama-quantize writes:
(KEY :u32 |VALUE|), (KEY :f32 VALUE), (KEY :bool T/NIL) or (KEY :string
VALUE).  Anything malformed -- and what llama-quantize would read as 0 or
cut short -- is a USAGE-ERROR."
  (let* ((sep (position #\= string))
         (key (and sep (subseq string 0 sep)))
         (rest (and sep (subseq string (1+ sep)))))
    (flet ((value-after (prefix)
             (and (>= (length rest) (length prefix)) (string= prefix rest :end2 (length prefix))
                  (subseq rest (length prefix)))))
      (cond ((or (null sep) (zerop sep) (>= sep 128))
             (usage-error "malformed KV override ~S: expected KEY=TYPE:VALUE, KEY 1 to 127 ~
characters" string))
            ((string= key "general.alignment")
             (usage-error "--override-kv ~A: expected another key (the alignment is the input's)"
                          key))
            ((value-after "int:")
             ;; llama-quantize writes |VALUE| as a u32
             (list key :u32 (abs (number-argument (format nil "--override-kv ~A (int:)" key)
                                                  (value-after "int:")
                                                  (list (- 1 (expt 2 32)) (1- (expt 2 32)))))))
            ((value-after "float:")
             (list key :f32 (number-argument (format nil "--override-kv ~A (float:)" key)
                                             (value-after "float:") :f32)))
            ((value-after "bool:")
             (let ((v (value-after "bool:")))
               (unless (member v '("true" "false") :test #'string=)
                 (usage-error "--override-kv ~A: expected true or false after bool:, found ~S" key v))
               (list key :bool (string= v "true"))))
            ((value-after "str:")
             (let ((v (value-after "str:")))
               (when (> (length (%utf8-octets v)) 127)
                 (usage-error "--override-kv ~A: expected a string of at most 127 bytes, found ~D"
                              key (length (%utf8-octets v))))
               (list key :string v)))
            (t (usage-error "--override-kv ~A: expected the type int:, float:, bool: or str: after =, ~
found ~S" key rest))))))

(defun apply-kv-overrides (metadata overrides)
  "METADATA with each of OVERRIDES ((key type value) ...) in turn removed
and appended, as gguf_set_val_* does."
  (dolist (o overrides metadata)
    (setf metadata (append (remove (first o) metadata :key #'first :test #'string=)
                           (list o)))))

(defun quantize-metadata (f ftype &optional split overrides)
  "F's metadata without the quantization and split keys, then
general.quantization_version and general.file_type = FTYPE, then the
--override-kv entries OVERRIDES (APPLY-KV-OVERRIDES).  For shard
SPLIT = (no count tensors) of a --keep-split output, llama-gguf-split's
keys follow, and the shards after the first have only those (as
llama-quantize writes them; general.alignment first when F's is not 32)."
  (let ((split-keys (when split
                      (destructuring-bind (no count tensors) split
                        (gguf:split-metadata no count tensors :as :llama-quantize)))))
    (if (and split (plusp (first split)))
        (if (= 32 (gguf:alignment f))
            split-keys
            (cons (list "general.alignment" :u32 (gguf:alignment f)) split-keys))
        (append (apply-kv-overrides
                 (append (remove-if (lambda (key)
                                      (member key '("general.quantization_version" "general.file_type")
                                              :test #'string=))
                                    (gguf:without-split-keys (gguf:metadata f)) :key #'first)
                         (list (list "general.quantization_version" :u32 2)
                               (list "general.file_type" :u32 ftype)))
                 overrides)
                split-keys))))

(defun float-type-id-p (id)
  "True for the ggml type ids quantize converts from and checks: F32, F16
and BF16 (0, 1, 30)."
  (member id '(0 1 30)))

(defun planned-copied-p (p)
  "True when the tensor of the plan P is copied as its bytes: it keeps its
type, and that type is not one quantize converts (and checks) on the way."
  (and (= (planned-source p) (planned-target p))
       (not (float-type-id-p (planned-source p)))))

(defun write-quantized (out plan metadata alignment outliers report done)
  "Write the PLANNED tensors PLAN, in that order, with METADATA to OUT,
streaming each converted tensor; answers the count of tensors done, DONE
plus PLAN's length (REPORT is called after each).  An error names the file
(the shard of a set) the tensor at fault was read from."
  (gguf:write
   out (gguf:make-file
        :metadata metadata :alignment alignment
        ;; general.alignment only when the input has it (then it is in
        ;; METADATA), as llama-quantize copies it
        :implicit-alignment t
        :tensors (mapcar (lambda (p)
                           (list (planned-name p)
                                 (if (planned-copied-p p)
                                     (gguf:tensor-octets (planned-file p) (planned-name p))
                                     :stream)
                                 :type (planned-target p) :dims (trim-dims (planned-ne p))))
                         plan))
   :stream
   (lambda (w)
     (let ((name nil) (path nil))    ; the tensor an unexpected error names, its file
       (with-tensor-named (path name)
         (dolist (p plan)
           (setf name (planned-name p)
                 path (gguf:path (planned-file p)))
           (unless (planned-copied-p p)
             (let ((columns (gethash name outliers)))
               (when (and columns (/= (planned-target p) (ggml-id "Q8_0")))
                 (tensor-data-error path name "is calibrated, but quantize makes it ~A: expected ~
Q8_0" (gguf:type-name (planned-target p))))
               (multiple-value-bind (ok status where)
                   (gguf:stream-put-tensor w (planned-file p) name
                                           :type (planned-target p)
                                           :mask (and columns
                                                      (outlier-mask 'quantize columns
                                                                    (first (planned-ne p)))))
                 (unless ok
                   (stream-failure (planned-file p) path p status where)))))
           (funcall report (incf done) p))))))
  done)

(defun quantize-file (in out &key (type :q8_0) calibration pure output-tensor-type
                                  token-embedding-type tensor-types dry-run keep-split
                                  allow-requantize leave-output-tensor override-kv threads)
  "Quantize the GGUF file IN into the GGUF file OUT as llama-quantize does
for the file type TYPE (a keyword or string naming one of
*QUANTIZE-FTYPES* in any case -- :q8_0, :q4_k_m, \"IQ4_XS\" -- or a string
of its ftype number): tensors of at least two dimensions whose name ends
in `weight' (norms, token types, position embeddings and a few small
weights excepted) are quantized, each to the type llama-quantize's
per-tensor rules give it for that file type (doc/command-line.md
section 3), falling back to a smaller block, or F16, when their rows do
not split into the type's blocks; every other tensor is copied in its
type; tensors are ordered by layer, then name;
general.quantization_version = 2 and general.file_type end the metadata.
IN's general.alignment is kept.  llama-quantize's options:
OUTPUT-TENSOR-TYPE and TOKEN-EMBEDDING-TYPE (type names) for output.weight
and the token embeddings, TENSOR-TYPES a list of \"PATTERN=TYPE\" rules
(the first whose regular expression occurs in a tensor's name gives its
type, when TYPE is a quantized one), PURE (every quantized tensor of the
main type, no mixture), LEAVE-OUTPUT-TENSOR (output.weight keeps its
type), ALLOW-REQUANTIZE (quantized tensors of IN are dequantized and
quantized again; without it they are refused), OVERRIDE-KV (a list of
\"KEY=TYPE:VALUE\" strings, see PARSE-KV-OVERRIDE: set in the output's
metadata, and read by the rules), THREADS (the thread count for this run;
NIL or below 1 keeps (THREADS)).  DRY-RUN decides and reports, writes nothing: its
summary is the plan, one line per tensor, then the summary line.
IN may be the first shard of a llama-gguf-split set: every shard is read,
and the output is one file, or with KEEP-SPLIT one shard per input shard
(OUT without its .gguf, then -0000I-of-0000N.gguf, each tensor in its
shard's order, split.* keys set as llama-quantize sets them, the other
keys in the first shard only; a single file
IN gives OUT-00001-of-00001.gguf without them, as llama-quantize).  The output
is streamed (one piece of one tensor in memory at a time).  A NaN or
infinity in IN, or a value that overflows its new type, signals
TENSOR-DATA-ERROR and writes nothing (shards are written all at once with
GGUF:WRITE-STAGED, so an older set under those names stays whole).
CALIBRATION, a calibration file (see READ-CALIBRATION), gives the matrices
it names the outlier-aware scales of doc/outliers.md (still plain Q8_0).  Answers a list
of (name type) of the tensors, in file order, the number of fall
backs, and the plan's summary line (after the plan's lines in a dry run)."
  (let ((old (threads)))
    (unwind-protect
         (progn (when (and threads (plusp threads))
                  (setf (threads) (min threads (max-threads))))
                (quantize-file-1 in out type calibration pure output-tensor-type
                                 token-embedding-type tensor-types dry-run keep-split
                                 allow-requantize leave-output-tensor override-kv))
      (setf (threads) old))))

(defun quantize-file-1 (in out type calibration pure output-tensor-type token-embedding-type
                        tensor-types dry-run keep-split allow-requantize leave-output-tensor
                        override-kv)
  (let* ((start (get-internal-real-time))
         (entry (handler-case (find-ftype (if (keywordp type) (symbol-name type) (string type)))
                  (usage-error (c)
                    (unknown-format-error 'quantize-file type "~A" (condition-line c)))))
         (main (ggml-id (third entry)))
         (ftype (second entry))
         (overrides (mapcar (lambda (o) (if (consp o) o (parse-kv-override o))) override-kv))
         (options (list :pure pure :leave-output leave-output-tensor
                        :output-type (and output-tensor-type (target-type-id output-tensor-type))
                        :token-embedding-type (and token-embedding-type
                                                   (target-type-id token-embedding-type))
                        ;; compiled once, not once per tensor
                        :rules (loop for (pattern . id) in (mapcar #'parse-tensor-type-rule
                                                                   tensor-types)
                                     collect (cons (compile-regex pattern) id))))
         (f (gguf:read in :shards t)))
    (unwind-protect
         (let* ((shards (gguf:shard-tensors f))
                (files (mapcar #'first shards))
                (outliers (if calibration
                              (calibration-outliers calibration f)
                              (make-hash-table :test 'equal)))
                (names (loop for (nil . infos) in shards
                             append (mapcar #'gguf:tensor-info-name infos)))
                ;; llama-quantize decides the types in the order it writes
                ;; them: by layer and name, or with --keep-split by shard
                ;; and offset.
                (targets (quantize-targets
                          files
                          (if keep-split
                              (loop for (nil . infos) in shards
                                    append (mapcar #'gguf:tensor-info-name
                                                   (stable-sort (copy-list infos) #'<
                                                                :key #'gguf:tensor-info-offset)))
                              (llama-tensor-order names))
                          main
                          (list* :mixture (make-mixture ftype (quantize-metadata f ftype nil overrides)
                                                        names)
                                 options)))
                (plans (loop for (file . infos) in shards
                             collect (quantize-plan file (mapcar #'gguf:tensor-info-name infos)
                                                    targets (gguf:path file)
                                                    :allow-requantize allow-requantize)))
                (plan (let ((all (apply #'append plans))
                            (table (make-hash-table :test 'equal)))
                        (dolist (p all)
                          (setf (gethash (planned-name p) table) p))
                        (mapcar (lambda (n) (gethash n table))
                                (llama-tensor-order (mapcar #'planned-name all)))))
                (report (tensor-progress (length plan)))
                (done 0))
           (cond (dry-run)              ; the plan is the summary's
                 ((not keep-split)
                  (write-quantized out plan (quantize-metadata f ftype nil overrides)
                                   (gguf:alignment f) outliers report 0))
                 (t
                  (let ((prefix (if (ends-with out ".gguf") (subseq out 0 (- (length out) 5)) out))
                        (count (length files)))
                    (gguf:write-staged
                     (loop for i below count collect (gguf:shard-path prefix i count))
                     (lambda (temp i)
                       (setf done (write-quantized temp (nth i plans)
                                                   (quantize-metadata f ftype
                                                                      (and (> count 1)
                                                                           (list i count (length plan)))
                                                                      overrides)
                                                   (gguf:alignment f) outliers report done)))))))
           (values (mapcar (lambda (p) (list (planned-name p) (gguf:type-name (planned-target p))))
                           (if keep-split (apply #'append plans) plan))
                   (count-if #'planned-fallback plan)
                   (with-output-to-string (s)
                     ;; A dry run's answer is its plan, wherever it goes.
                     (when dry-run
                       (loop for p in plan
                             for i from 1
                             do (write-plan-line s i (length plan) p)))
                     (quantize-summary s (if keep-split
                                             (format nil "~A (~D shards)" out (length files))
                                             out)
                                       plan
                                       (/ (- (get-internal-real-time) start)
                                          (float internal-time-units-per-second 1d0))
                                       :dry-run dry-run))))
      (gguf:close f))))
