;;;; test-quantize-tool.lisp - `rontolisp quantize' writes what llama-quantize
;;;; writes: for every golden input, every tensor has llama-quantize's type,
;;;; dims, order and bytes (read from its output at the offsets gguf-py's
;;;; dumps give, independent of our reader), and the refused inputs fail
;;;; with exit 1, one line and no file.

(in-package "RONTOLISP-TESTS")

(def-suite quantize-tool :in all :description "rontolisp quantize against llama-quantize.")
(in-suite quantize-tool)

(defparameter *quantize-golden*
  '(("q8_main.f32.gguf" "q8_main.q8_0.gguf")
    ("q8_f16src.f16.gguf" "q8_f16src.q8_0.gguf")
    ("q8_bf16src.bf16.gguf" "q8_bf16src.q8_0.gguf")
    ("q8_align64.f32.gguf" "q8_align64.q8_0.gguf"))
  "Golden inputs with llama-quantize's output for each.  Every tensor's
type, dims, order and bytes must be equal, and for an input without
general.alignment the whole file; at alignment 64 llama-quantize's layout
is wrong, so that file differs by design (the input's alignment is kept).")

(defun octets-at (octets start count)
  (subseq octets start (+ start count)))

(defun u64-at (octets pos)
  (loop for i below 8 sum (ash (aref octets (+ pos i)) (* 8 i))))

(test quantize-tool-tensor-choice
  (is (rontolisp::quantizable-tensor-p "blk.0.attn_q.weight" '(64 64)))
  (is (rontolisp::quantizable-tensor-p "blk.0.experts.weight" '(64 4 2)))
  (is (not (rontolisp::quantizable-tensor-p "blk.0.one_row.weight" '(64 1))))
  (is (not (rontolisp::quantizable-tensor-p "blk.0.attn_norm.weight" '(64 64))))
  (is (not (rontolisp::quantizable-tensor-p "blk.0.ffn_gate_inp.weight" '(64 4))))
  (is (not (rontolisp::quantizable-tensor-p "token_types.weight" '(64 3))))
  (is (not (rontolisp::quantizable-tensor-p "position_embd.weight" '(64 512))))
  (is (not (rontolisp::quantizable-tensor-p "blk.0.bias_2d.bias" '(32 4))))
  (is (equal '(64) (rontolisp::trim-dims '(64 1))))
  (is (equal '(1) (rontolisp::trim-dims '(1 1))))
  (is (equal '(64 1 2) (rontolisp::trim-dims '(64 1 2 1)))))

(test quantize-tool-order
  (is (equal '("output.weight" "output_norm.weight" "token_embd.weight"
               "blk.2.a.weight" "blk.10.a.weight" "blk.10.b.weight")
             (command-line::llama-tensor-order
              '("blk.10.b.weight" "blk.2.a.weight" "token_embd.weight" "blk.10.a.weight"
                "output_norm.weight" "output.weight")))))

(test quantize-tool-orders-names-as-bytes
  "llama.cpp orders names as byte strings: a byte that is not UTF-8 (held
as U+DC80..U+DCFF) sorts by its own value, 0x80 before the 0xC3 that
starts an e-acute, and a four-byte character after both."
  (let ((raw-80 (format nil "blk.0.~C.weight" (code-char #xdc80)))
        (raw-ff (format nil "blk.0.~C.weight" (code-char #xdcff)))
        (e-acute (format nil "blk.0.~C.weight" (code-char #xe9)))
        (emoji (format nil "blk.0.~C.weight" (code-char #x1f600))))
    (is (equal (list raw-80 e-acute emoji raw-ff "blk.1.a")
               (command-line::llama-tensor-order (list "blk.1.a" raw-ff emoji e-acute raw-80))))
    (is (command-line::octets< #(1 2) #(1 2 0)))
    (is (not (command-line::octets< #(1 2) #(1 2))))
    (is (not (command-line::octets< #(2) #(1 9))))))

(test quantize-tool-matches-llama-quantize
  "Every output tensor has the type, dims, order and bytes llama-quantize
wrote; the metadata ends with quantization_version and file_type."
  (let ((checked 0))
    (loop for (in ref) in *quantize-golden*
          do (with-tracked-fixture ((golden ref))
               (let ((out (tmp-path "q.gguf")))
                 (unwind-protect
                      (progn
                        (is (= 0 (run-exe (list "quantize" (golden in) out "q8_0"))))
                        (let* ((ref-json (golden-json ref))
                               (ours (file-octets out))
                               (refs (file-octets (golden ref))))
                          (gguf:with-file (f out)
                            (is (equal (mapcar (lambda (tj) (gethash "name" tj)) (json-tensors ref-json))
                                       (gguf:tensor-names f))
                                "~A: tensor order differs" in)
                            (is (equal '("general.quantization_version" "general.file_type")
                                       (last (remove "general.alignment" (gguf:keys f)
                                                     :test #'string=)
                                             2)))
                            ;; the key only when the input has it, as llama-quantize copies it
                            (gguf:with-file (i (golden in))
                              (is (eql (gguf:value i "general.alignment")
                                       (gguf:value f "general.alignment")))
                              (unless (gguf:value i "general.alignment")
                                (is (equalp refs ours) "~A: the whole file differs" in)))
                            (is (eql 7 (gguf:value f "general.file_type")))
                            (is (eql 2 (gguf:value f "general.quantization_version")))
                            (dolist (tj (json-tensors ref-json))
                              (let ((info (gguf:tensor-info f (gethash "name" tj))))
                                (is (= (gethash "type_id" tj) (gguf:tensor-info-type-id info)))
                                (is (equal (coerce (gethash "ne" tj) 'list) (gguf:tensor-info-dims info)))
                                (is (zerop (mod (gguf:tensor-info-offset info) (gguf:alignment f))))
                                (is (equalp (octets-at refs (+ (gethash "data_offset" ref-json)
                                                               (gethash "offset" tj))
                                                       (gethash "nbytes" tj))
                                            (octets-at ours (+ (gguf:data-offset f)
                                                               (gguf:tensor-info-offset info))
                                                       (gguf:tensor-info-bytes info)))
                                    "~A ~A: bytes differ" in (gethash "name" tj))
                                (incf checked))))))
                   (ignore-errors (delete-file out))))))
    (is (= 29 checked))))

(test quantize-tool-honours-alignment
  (with-tracked-fixture ((golden "q8_align64.f32.gguf"))
    (let ((out (tmp-path "a64.gguf")))
      (unwind-protect
           (progn
             (rontolisp:quantize-file (golden "q8_align64.f32.gguf") out)
             (gguf:with-file (f out)
               (is (= 64 (gguf:alignment f)))
               (is (zerop (mod (gguf:data-offset f) 64)))
               (dolist (info (gguf:tensor-infos f))
                 (is (zerop (mod (gguf:tensor-info-offset info) 64))))))
        (ignore-errors (delete-file out))))))

(test quantize-tool-refuses-bad-values
  "NaN input and an overflowing scale: exit 1, one line naming the tensor,
no output file."
  (loop for (in tensor) in '(("q8_nan.f32.gguf" "blk.0.has_nan.weight")
                             ("q8_overflow.f32.gguf" "blk.0.overflow.weight"))
        do (with-tracked-fixture ((golden in))
             (let ((out (tmp-path "bad.gguf")))
               (multiple-value-bind (code stdout stderr)
                   (run-exe (list "quantize" (golden in) out "q8_0"))
                 (declare (ignore stdout))
                 (is (= 1 code))
                 (is (= 1 (count #\Newline stderr)) "~A: expected one line, found ~S" in stderr)
                 (is (contains stderr tensor))
                 (is (not (probe-file out))))
               (signals rontolisp:tensor-data-error
                 (rontolisp:quantize-file (golden in) out))
               (is (not (probe-file out)))))))

(test quantize-tool-usage
  (is (= 2 (run-exe (list "quantize" "a.gguf"))))
  (is (= 2 (run-exe (list "quantize" "a.gguf" "b.gguf" "iq2_xxs"))))
  (is (= 2 (run-exe (list "quantize" "a.gguf" "b.gguf" "q4_k_m" "two"))))
  (is (= 1 (run-exe (list "quantize" "/nonexistent/in.gguf" (tmp-path "x.gguf") "q8_0")))))

(test quantize-tool-keeps-invalid-utf8-bytes
  "Keys, strings, tokens and tensor names are bytes: quantize writes back
the whole key-value section byte for byte, invalid UTF-8 included, and
tokens that differ only in such bytes stay distinct."
  (let ((in (tmp-path "bytes.gguf")) (out (tmp-path "bytes.q8.gguf")))
    (unwind-protect
         (multiple-value-bind (file kv) (invalid-utf8-gguf)
           (write-octets-file in file)
           (multiple-value-bind (code stdout stderr) (run-exe (list "quantize" in out "q8_0"))
             (declare (ignore stdout))
             (is (= 0 code) "~A" stderr))
           (let ((written (file-octets out)))
             (is (equalp kv (subseq written 24 (+ 24 (length kv))))
                 "the key-value section was not written back byte for byte")
             (is (octets-search *invalid-utf8-tensor-name* written)))
           (gguf:with-file (f out)
             (let ((tokens (coerce (gguf:value f "tokenizer.ggml.tokens") 'list)))
               (is (= (+ 2 (length *invalid-utf8*)) (length tokens)))
               (is (= (length tokens) (length (remove-duplicates tokens :test #'string=)))))
             (is (equal (list "Q8_0") (mapcar #'gguf:tensor-info-type (gguf:tensor-infos f))))))
      (ignore-errors (delete-file in))
      (ignore-errors (delete-file out)))))

(test quantize-tool-names-the-tensor-of-any-failure
  "What goes wrong while quantize works on a tensor names the file and the
tensor, whatever signalled it; a GGUF file error keeps its own condition."
  (let* ((name "blk.0.ffn_up.weight")
         (e (handler-case (command-line::with-tensor-named ("/m.gguf" name)
                            (+ (make-array '(64 64) :element-type 'single-float) 1))
              (error (e) e))))
    (is (typep e 'rontolisp:tensor-data-error))
    (is (string= name (rontolisp:tensor-data-error-tensor e)))
    (is (string= "/m.gguf" (rontolisp:tensor-data-error-path e)))
    (is (contains (princ-to-string e) "#<(simple-array single-float (64 64))>") "~A" e)
    (is (<= (length (princ-to-string e)) rontolisp::*message-limit*)))
  (let ((name nil))
    (signals type-error (command-line::with-tensor-named ("/m.gguf" name) (+ 'a 1))))
  (signals gguf:gguf-error
    (command-line::with-tensor-named ("/m.gguf" "w") (gguf::gguf-error "/m.gguf" :x 1 "bad"))))

(test quantize-tool-refuses-a-tensor-of-no-elements
  "A tensor with a dimension of 0 is refused before anything is written,
naming the file, the tensor and its dimensions (it once named the
primitive %STREAM-TENSOR and its sixth argument)."
  (let ((in (tmp-path "zero.gguf")) (out (tmp-path "zero.q8.gguf")))
    (unwind-protect
         (dolist (dims '((0 32) (32 0)))
           (gguf:write in (gguf:make-file
                           :tensors (list (list "a.weight" (make-array '(2 32) :element-type 'single-float
                                                                               :initial-element 1.0))
                                          (list "blk.0.ffn_up.weight"
                                                (make-array dims :element-type 'single-float)))))
           (dolist (threads '("1" "2"))
             (multiple-value-bind (code stdout stderr) (run-exe (list "quantize" in out "q8_0" threads))
               (declare (ignore stdout))
               (is (= 1 code) "~S: exit ~D" dims code)
               (is (contains stderr in) "~A" stderr)
               (is (contains stderr "tensor \"blk.0.ffn_up.weight\" has dimensions") "~A" stderr)
               (is (contains stderr "expected at least one element") "~A" stderr)
               (is (not (contains stderr "STREAM")) "~A" stderr)
               (is (not (contains stderr "argument")) "~A" stderr)
               (is (not (probe-file out))))))
      (dolist (p (list in out)) (ignore-errors (delete-file p))))))

(test quantize-tool-input-truncated-while-read-is-an-error-naming-it
  "An input truncated after it was opened (here before its tensor is read,
so no timing is involved) is a read error naming the file, with one thread
as with two: exit 1, nothing written.  Reading the mapping past the new end
once faulted with interrupts disabled, and ECL printed an internal error."
  (let ((in (tmp-path "shrinks.gguf")) (out (tmp-path "shrinks.q8.gguf"))
        (script (tmp-path "shrink.lisp")))
    (unwind-protect
         (progn
           (write-file-string script (format nil "(in-package \"RONTOLISP\")
(gguf:with-file (f ~S)
  (ext:run-program \"truncate\" (list \"-s\" \"4096\" ~:*~S) :output nil)
  (let ((dims (gguf:tensor-info-dims (gguf:tensor-info f \"blk.0.ffn_up.weight\"))))
    (gguf:write ~S (gguf:make-file :tensors (list (list \"blk.0.ffn_up.weight\" :stream :type 8 :dims dims)))
                :stream (lambda (w) (gguf:stream-put-tensor w f \"blk.0.ffn_up.weight\" :type 8)))))~%"
                                             in out))
           (dolist (threads '("1" "2"))
             (gguf:write in (gguf:make-file
                             :tensors (list (list "blk.0.ffn_up.weight"
                                                  (make-array '(256 1024) :element-type 'single-float
                                                                          :initial-element 1.0)))))
             (multiple-value-bind (code stdout stderr)
                 (run-exe (list "--threads" threads "script" script))
               (declare (ignore stdout))
               (is (= 1 code) "~A thread(s): exit ~D: ~A" threads code stderr)
               (is (contains stderr in) "~A" stderr)
               (is (contains stderr "truncated while being read") "~A" stderr)
               (is (not (contains stderr "Internal error")) "~A" stderr)
               (is (not (probe-file out))))))
      (dolist (p (list in out script)) (ignore-errors (delete-file p))))))

(test quantize-tool-and-inspect-many-tensors-in-linear-time
  "Files of 5,000 and 50,000 tensors are made, inspected (text and JSON)
and quantized, and each step's processor time grows less than 30 times for
ten times the tensors: linear is 10, quadratic 100.  Looking each tensor up
by name in a list made quantize quadratic (over 120 s at 100,000 tensors,
30 s at 50,000, against about half a second at 5,000).  A ratio of two
sizes, not seconds, so that the sanitizers' slowdown and a loaded machine
do not fail it; quantize runs in this process, so that starting a process
does not dilute the ratio and no child deadline applies (under the
sanitizers each tiny tensor costs milliseconds)."
  (let* ((sizes '(5000 50000))
         (ins (loop for n in sizes collect (tmp-path (format nil "~D.gguf" n))))
         (outs (loop for n in sizes collect (tmp-path (format nil "~D.q8_0.gguf" n))))
         (data (make-array 32 :element-type 'single-float :initial-element 0.5)))
    (flet ((grows-linearly (what small big)
             ;; the small time floored, so that a clock's grain cannot make the ratio
             (let ((ratio (/ big (max small 1/20))))
               (format t "~&  ~A: ~,2F s of CPU at ~D tensors, ~,2F s at ~D: ratio ~,1F~%"
                       what small (first sizes) big (second sizes) ratio)
               (is (< ratio 30) "~A: ~,2F s of CPU at ~D tensors, ~,2F s at ~D: ratio ~,1F ~
(linear 10)" what small (first sizes) big (second sizes) ratio))))
      (unwind-protect
           (progn
             (apply #'grows-linearly "gguf:write"
                    (loop for n in sizes for in in ins
                          collect (run-seconds
                                   (lambda ()
                                     (gguf:write in (gguf:make-file
                                                     :tensors (loop for i below n
                                                                    collect (list (format nil "blk.~D.weight" i)
                                                                                  data))))))))
             (loop for (script what) in '(("\"$0\" inspect \"$1\"" "inspect")
                                          ("\"$0\" inspect --json \"$1\"" "inspect --json"))
                   do (apply #'grows-linearly what
                             (loop for in in ins
                                   collect (multiple-value-bind (seconds code)
                                               (child-cpu-seconds script in)
                                             (is (eql 0 code) "~A ~A exited ~S" what in code)
                                             seconds))))
             (apply #'grows-linearly "quantize"
                    (loop for in in ins for out in outs
                          collect (let ((*standard-output* (make-broadcast-stream))
                                        (*error-output* (make-broadcast-stream)))
                                    (run-seconds (lambda ()
                                                   (rontolisp::quantize-file in out :type :q8_0))))))
             (gguf:with-file (f (second outs))
               (is (= 50000 (length (gguf:tensor-infos f))))
               (is (string= "F32" (gguf:tensor-info-type (gguf:tensor-info f "blk.49999.weight"))))))
        (dolist (f (append ins outs)) (ignore-errors (delete-file f)))))))

;;; Streaming: the same bytes as the whole-tensor path, whatever the threads.

(defun in-memory-quantize (in out &rest options &key (type :q8_0) &allow-other-keys)
  "OUT written the way quantize worked before it streamed: each tensor read
whole (GGUF:TENSOR), converted by the Lisp functions (QUANTIZE,
CONVERT-TENSOR-DATA) and held until GGUF:WRITE writes them all; the types
from the same plan."
  (gguf:with-file (f in)
    (let* ((main (rontolisp::tensor-type-id (rontolisp::find-tensor-type type)))
           (order (command-line::llama-tensor-order (gguf:tensor-names f)))
           (plan (command-line::quantize-plan
                  f order
                  (command-line::quantize-targets
                   (list f) order main
                   (list :rules (mapcar #'command-line::parse-tensor-type-rule
                                        (getf options :tensor-types))))
                  in))
           (tensors
             (loop for p in plan
                   for name = (command-line::planned-name p)
                   for ne = (command-line::planned-ne p)
                   for target = (command-line::planned-target p)
                   collect (if (= target (command-line::planned-source p))
                               (list name (gguf:tensor-octets f name)
                                     :type target :dims (rontolisp::trim-dims ne))
                               (let ((data (gguf:tensor f name)))
                                 (list name
                                       (if (= target 8)
                                           (rontolisp:quantize (command-line::data-as-matrix data ne)
                                                               :q8_0)
                                           (command-line::convert-tensor-data
                                            data (ecase target (0 :f32) (1 :f16) (30 :bf16))))
                                       :dims (rontolisp::trim-dims ne)))))))
      (gguf:write out (gguf:make-file
                       :metadata (append (remove-if (lambda (e)
                                                      (member (first e)
                                                              '("general.quantization_version"
                                                                "general.file_type")
                                                              :test #'string=))
                                                    (gguf:metadata f))
                                         (list (list "general.quantization_version" :u32 2)
                                               (list "general.file_type" :u32
                                                     (ecase main (8 7) (1 1) (30 32) (0 0)))))
                       :tensors tensors
                       :alignment (gguf:alignment f) :implicit-alignment t)))))

(defun quantize-octets (in &rest options)
  "The bytes quantize-file writes for IN with OPTIONS (a temporary file)."
  (let ((out (tmp-path "s.gguf")))
    (unwind-protect
         (progn (apply #'rontolisp:quantize-file in out options)
                (file-octets out))
      (ignore-errors (delete-file out)))))

(test quantize-tool-streams-the-in-memory-bytes
  "The streamed file is byte for byte the file the whole-tensor path
writes (Lisp's QUANTIZE and conversions, every tensor in memory), for
every golden input and for F16 and BF16 targets, on one thread and on
four."
  (let ((compared 0))
    (loop for (in . cases)
            in '(("q8_main.f32.gguf" (:type :q8_0) (:type :bf16)
                  (:type :q8_0 :tensor-types ("gauss=bf16" "experts=f32" "narrow=f16")))
                 ("q8_f16src.f16.gguf" (:type :q8_0) (:type :f16) (:type :bf16) (:type :f32))
                 ("q8_bf16src.bf16.gguf" (:type :q8_0) (:type :bf16) (:type :f32))
                 ("q8_align64.f32.gguf" (:type :q8_0) (:type :f16)))
          do (with-tracked-fixture ((golden in))
               (loop for options in cases
                     do (let ((ref (tmp-path "ref.gguf")))
                          (unwind-protect
                               (progn
                                 (apply #'in-memory-quantize (golden in) ref options)
                                 (let ((expected (file-octets ref))
                                       (saved (rontolisp::threads)))
                                   (unwind-protect
                                        (dolist (n '(1 4))
                                          (setf (rontolisp::threads) n)
                                          (is (equalp expected
                                                      (apply #'quantize-octets (golden in) options))
                                              "~A ~S, ~D thread~:P: streamed bytes differ" in options n)
                                          (incf compared))
                                     (setf (rontolisp::threads) saved))))
                            (ignore-errors (delete-file ref)))))))
    (is (= 24 compared))))

(defun big-f32-file (path &key nan overflow)
  "A file of tensors spanning several of quantize's pieces (4 MiB): a
1024 x 1536 matrix, a 2100 x 1000 one (rows not a multiple of 32: F16),
blk.1.late.weight (1024 x 1536), an output.weight and the token
embeddings.  NAN puts a NaN in the last row of blk.1.late.weight, OVERFLOW
a value past binary16 in its first row."
  (let ((state (make-random-state t)))
    (flet ((m (rows cols) (random-matrix rows cols :scale 3.0 :state state)))
      (let ((late (m 1024 1536)))
        (when overflow (setf (aref late 0 7) 1e9))
        (gguf:write path (gguf:make-file
                          :metadata '(("general.architecture" :string "llama"))
                          :tensors (list (list "blk.0.early.weight" (m 1024 1536))
                                         (list "blk.0.odd_rows.weight" (m 2100 1000))
                                         (list "blk.1.late.weight" late)
                                         (list "output.weight" (m 64 256))
                                         (list "token_embd.weight" (m 64 256)))))
        (when nan
          (poke-f32-bits path "blk.1.late.weight" (+ (* 1023 1536) 1500) #x7fc00000))
        path))))

(defun leftovers (path)
  "Temporary files of the writer left beside PATH."
  (directory (concatenate 'string path ".rontolisp-tmp.*")))

(test quantize-tool-streams-big-tensors
  "Tensors of several pieces (and rows that fall back to F16) stream to the
whole-tensor path's bytes, with options."
  (let ((in (big-f32-file (tmp-path "big.gguf"))) (ref (tmp-path "big-ref.gguf")))
    (unwind-protect
         (dolist (options '((:type :q8_0)
                            (:type :q8_0 :tensor-types ("early=bf16" "^blk\\.1\\.=f16"))
                            (:type :f16)))
           (apply #'in-memory-quantize in ref options)
           (is (equalp (file-octets ref) (apply #'quantize-octets in options))
               "~S: streamed bytes differ" options))
      (ignore-errors (delete-file in))
      (ignore-errors (delete-file ref)))))

(test quantize-tool-failure-mid-way-leaves-nothing
  "A NaN in the last piece of a tensor written after others: the error
names it, and neither the output nor a temporary file is left; a NaN
after an overflowing block is the one reported, as a whole-tensor check
finds it first."
  (let ((in (tmp-path "nan.gguf")) (out (tmp-path "nan.q8.gguf")))
    (unwind-protect
         (dolist (overflow '(nil t))
           (big-f32-file in :nan t :overflow overflow)
           (let ((e (handler-case (progn (rontolisp:quantize-file in out) nil)
                      (rontolisp:tensor-data-error (e) e))))
             (is (typep e 'rontolisp:tensor-data-error))
             (when e
               (is (string= "blk.1.late.weight" (rontolisp:tensor-data-error-tensor e)))
               (is (contains (princ-to-string e) "found NaN at element 1572828") "~A" e)))
           (is (not (probe-file out)))
           (is (null (leftovers out))))
      (ignore-errors (delete-file in)))))

(test quantize-tool-overflow-in-a-late-piece
  (let ((in (tmp-path "ovf.gguf")) (out (tmp-path "ovf.q8.gguf")))
    (unwind-protect
         (progn
           (big-f32-file in :overflow t)
           (multiple-value-bind (code stdout stderr) (run-exe (list "quantize" in out "q8_0"))
             (declare (ignore stdout))
             (is (= 1 code))
             (is (contains stderr "blk.1.late.weight\" cannot be quantized: row 0, block 0") "~A" stderr))
           (is (not (probe-file out)))
           (is (null (leftovers out))))
      (ignore-errors (delete-file in)))))

;;; llama-quantize's options.

(test quantize-tool-target-types
  "The types quantize writes by name in any case (and llama-quantize's file
types, names or ftype numbers, for the main type); other ggml types
refused by name."
  (is (= 8 (command-line::target-type-id "q8_0")))
  (is (= 12 (command-line::target-type-id "q4_K")))
  (is (= 23 (command-line::target-type-id "IQ4_XS")))
  (is (= 12 (command-line::target-type-id "q4_k_m" :ftype t)))
  (is (= 12 (command-line::target-type-id "15" :ftype t)))
  (is (= 11 (command-line::target-type-id "Q3_K" :ftype t)))
  (is (= 20 (command-line::target-type-id "25" :ftype t)))
  (signals rontolisp:usage-error (command-line::target-type-id "q4_k_m"))
  (signals rontolisp:usage-error (command-line::target-type-id "99" :ftype t))
  (is (= 30 (command-line::target-type-id "BF16")))
  (is (= 8 (command-line::target-type-id "7" :ftype t)))
  (is (= 30 (command-line::target-type-id "32" :ftype t)))
  (is (= 0 (command-line::target-type-id "0" :ftype t)))
  (signals rontolisp:usage-error (command-line::target-type-id "7"))
  (dolist (bad '("tq1_0" "IQ2_XXS" "Q1_0"))
    (let ((e (handler-case (command-line::target-type-id bad) (rontolisp:usage-error (e) e))))
      (is (typep e 'rontolisp:usage-error))
      (is (contains (princ-to-string e) (string-upcase bad)) "~A" e)
      (is (contains (princ-to-string e) "does not write") "~A" e)))
  (signals rontolisp:usage-error (command-line::target-type-id "q9_9")))

(test quantize-tool-tensor-type-rules
  "--tensor-type as llama-quantize parses it: PATTERN=TYPE split at the
first `=', the pattern lower-cased, searched in the name as a regular
expression; the first matching rule wins."
  (is (equal '("attn_q" . 1) (command-line::parse-tensor-type-rule "ATTN_Q=f16")))
  (is (equal '("blk\\.[0-9]+\\.ffn_(up|down)" . 30)
             (command-line::parse-tensor-type-rule "blk\\.[0-9]+\\.ffn_(up|down)=bf16")))
  (dolist (bad '("attn_q" "=f16" "attn_q=" "attn_q=q4_k_m" "attn_(q=f16"))
    (signals rontolisp:usage-error (command-line::parse-tensor-type-rule bad)))
  (let ((rules (mapcar #'command-line::parse-tensor-type-rule
                       '("blk\\.1\\.=f32" "attn=f16" "^blk\\.\\d+\\.ffn=bf16"))))
    (is (= 0 (command-line::tensor-type-rule-for "blk.1.attn_q.weight" rules)))
    (is (= 1 (command-line::tensor-type-rule-for "blk.2.attn_q.weight" rules)))
    (is (= 30 (command-line::tensor-type-rule-for "blk.12.ffn_up.weight" rules)))
    (is (null (command-line::tensor-type-rule-for "xblk.12.ffn_up.weight" (last rules))))
    (is (null (command-line::tensor-type-rule-for "token_embd.weight" rules)))))

(test quantize-tool-target-choice
  "llama_tensor_get_type for these types: untouched tensors keep theirs,
the token embeddings and output.weight take their options, rules apply
only under a Q8_0 main type, and Q8_0 falls back to F16 on odd rows."
  (flet ((target (name ne source main &rest options)
           (apply #'command-line::quantize-target name ne source main options)))
    (let ((rules (list (command-line::parse-tensor-type-rule "attn_q=bf16"))))
      (is (= 0 (target "blk.0.attn_norm.weight" '(64 64) 0 8 :rules rules)))
      (is (= 30 (target "blk.0.attn_q.weight" '(64 64) 0 8 :rules rules)))
      (is (= 8 (target "blk.0.attn_k.weight" '(64 64) 0 8 :rules rules)))
      (is (= 1 (target "blk.0.attn_q.weight" '(64 64) 0 1 :rules rules)))
      (is (= 1 (target "blk.0.attn_k.weight" '(48 64) 0 8)))
      (is (= 0 (target "output.weight" '(64 64) 0 8 :output-type 0)))
      (is (= 30 (target "token_embd.weight" '(64 64) 0 8 :token-embedding-type 30)))
      (is (= 8 (target "token_embd.weight" '(64 64) 0 8 :output-type 0)))
      (is (= 8 (target "blk.0.attn_k.weight" '(64 64) 0 8 :pure t))))))

(defun tensor-types-of (path)
  (gguf:with-file (f path)
    (mapcar (lambda (i) (cons (gguf:tensor-info-name i) (gguf:tensor-info-type i)))
            (gguf:tensor-infos f))))

(test quantize-tool-options-on-the-command-line
  "--tensor-type, --output-tensor-type and --token-embedding-type change
the types written; --pure changes nothing; general.file_type follows the
main type."
  (with-tracked-fixture ((golden "q8_main.f32.gguf"))
    (let ((in (golden "q8_main.f32.gguf")) (out (tmp-path "opt.gguf")) (plain (tmp-path "plain.gguf")))
      (unwind-protect
           (progn
             (is (= 0 (run-exe (list "quantize" in plain "q8_0"))))
             (is (= 0 (run-exe (list "quantize" "--tensor-type" "GAUSS_=bf16" "--tensor-type" "gauss=f32"
                                     "--output-tensor-type" "f16" "--token-embedding-type" "BF16"
                                     in out "q8_0"))))
             (let ((types (tensor-types-of out)) (before (tensor-types-of plain)))
               (is (string= "F16" (cdr (assoc "output.weight" types :test #'string=))))
               (is (string= "BF16" (cdr (assoc "token_embd.weight" types :test #'string=))))
               (is (string= "BF16" (cdr (assoc "blk.0.gauss_8x64.weight" types :test #'string=))))
               (is (string= "Q8_0" (cdr (assoc "blk.0.gauss_8x64.weight" before :test #'string=))))
               (is (string= "F32" (cdr (assoc "blk.0.attn_norm.weight" types :test #'string=))))
               (is (equal (mapcar #'car before) (mapcar #'car types))))
             (is (= 0 (run-exe (list "quantize" "--pure" in out "Q8_0"))))
             (is (equalp (file-octets plain) (file-octets out)) "--pure changed the bytes")
             (is (= 0 (run-exe (list "quantize" in out "32"))))
             (gguf:with-file (f out)
               (is (eql 32 (gguf:value f "general.file_type")))
               (is (string= "BF16" (gguf:tensor-info-type (gguf:tensor-info f "blk.0.gauss_8x64.weight")))))
             ;; F16 cannot hold blk.1.edge_blocks.weight's values: refused, nothing written
             (ignore-errors (delete-file out))
             (multiple-value-bind (code stdout stderr) (run-exe (list "quantize" in out "f16"))
               (declare (ignore stdout))
               (is (= 1 code))
               (is (contains stderr "edge_blocks.weight\" cannot be converted to F16") "~A" stderr))
             (is (not (probe-file out))))
        (ignore-errors (delete-file out))
        (ignore-errors (delete-file plain))))))

(test quantize-tool-dry-run-writes-nothing
  (with-tracked-fixture ((golden "q8_main.f32.gguf"))
    (let ((out (tmp-path "dry.gguf")))
      (multiple-value-bind (code stdout stderr)
          (run-exe (list "quantize" "--dry-run" (golden "q8_main.f32.gguf") out "q8_0"))
        (is (= 0 code) "~A" stderr)
        (is (contains stdout "dry run") "~A" stdout)
        (is (contains stdout "17 tensors (10 Q8_0, 5 F32, 2 F16, 2 fall backs)") "~A" stdout)
        (is (contains stdout "bits per weight") "~A" stdout)
        ;; The plan is printed through a pipe too: a line per tensor, then the summary.
        (let ((lines (split-lines stdout)))
          (is (= 18 (length lines)) "~A" stdout)
          (is (= 17 (count-if (lambda (l) (eql 0 (search "[" l))) lines)))
          (is (contains (first lines) "[   1/17]"))
          (is (some (lambda (l) (and (contains l "F32   -> Q8_0") (contains l "B ->"))) lines) "~A" stdout)
          (is (= 2 (count-if (lambda (l) (contains l "(fall back)")) lines)))
          (is (contains (car (last lines)) "dry run"))))
      (is (not (probe-file out)))
      (is (null (leftovers out))))))

(test quantize-tool-refuses-options-by-name
  (with-tracked-fixture ((golden "q8_main.f32.gguf"))
    (let ((in (golden "q8_main.f32.gguf")) (out (tmp-path "r.gguf")))
      (loop for (args . needle)
              in `((("--output-tensor-type" "tq2_0") . "TQ2_0")
                   (("--token-embedding-type" "iq2_xs") . "IQ2_XS")
                   (("--tensor-type" "attn=iq3_s") . "IQ3_S")
                   (("--tensor-type" "attn") . "PATTERN=TYPE"))
            do (multiple-value-bind (code stdout stderr)
                   (run-exe (append (list "quantize") args (list in out "q8_0")))
                 (declare (ignore stdout))
                 (is (= 2 code) "~S exited ~D" args code)
                 (is (contains stderr needle) "~S: ~A" args stderr)
                 (is (not (probe-file out))))))))

(test quantize-tool-speaks-like-llama-quantize
  ;; What a llama-quantize user reaches for.  Before: --help listed no
  ;; types, a quantized input said "is not done", --imatrix was an unknown
  ;; option, \\b in a --tensor-type pattern an unknown escape, and a small
  ;; file's sizes printed as "0.00 MiB".
  (let ((in (golden "quants/quant_main.f32.gguf"))
        (q8 (tmp-path "speaks-q8.gguf"))
        (out (tmp-path "speaks.gguf")))
    (with-tracked-fixture (in)
      (unwind-protect
           (progn
             (multiple-value-bind (code stdout) (run-exe (list "quantize" "--help"))
               (is (= 0 code))
               ;; every type it makes on a line of its own with its bits per weight
               (loop for (name ftype) in command-line::*quantize-ftypes*
                     unless (member name '("Q3_K" "Q4_K" "Q5_K") :test #'string=)
                       do (is (some (lambda (l) (and (contains l (format nil " ~D  ~A " ftype name))
                                                     (contains l " bpw  ")))
                                    (split-lines stdout))
                              "~A missing from --help: ~A" name stdout))
               (is (contains stdout "Q4_K = Q4_K_M") "~A" stdout)
               (is (contains stdout " 8.50 bpw") "~A" stdout)
               (is (contains stdout "IQ2_XXS") "~A" stdout))
             (rontolisp:quantize-file in q8 :type "q8_0")
             (multiple-value-bind (code stdout stderr) (run-exe (list "quantize" q8 out "q4_k_m"))
               (declare (ignore stdout))
               (is (= 1 code))
               (is (contains stderr "add --allow-requantize") "~A" stderr))
             (loop for (args . needle)
                     in '((("--imatrix" "imatrix.dat" "q4_k_m") . "expected no importance matrix")
                          (("iq2_xs") . "llama-quantize refuses it without --imatrix")
                          (("q4_k_m" "--tensor-type" "(?i)attn_v=q8_0") . "inline flag (?i)"))
                   do (multiple-value-bind (code stdout stderr)
                          (run-exe (append (list "quantize" in out) args))
                        (declare (ignore stdout))
                        (is (= 2 code) "~S exited ~D" args code)
                        (is (contains stderr needle) "~S: ~A" args stderr)))
             ;; ECMAScript's \\d and \\b, as llama-quantize's users write them
             (multiple-value-bind (code stdout stderr)
                 (run-exe (list "quantize" "--dry-run" "--tensor-type" "blk\\.\\d+\\.attn_v\\b=q8_0"
                                in out "q4_k_m"))
               (is (= 0 code) "~A" stderr)
               (is (contains stdout "blk.1.attn_v.weight                  F32   -> Q8_0") "~A" stdout)
               (is (not (or (contains stdout "0.00 MiB") (contains stdout "0.00 KiB"))) "~A" stdout)
               (is (contains stdout " KiB") "~A" stdout))
             (is (not (probe-file out))))
        (ignore-errors (delete-file q8))
        (ignore-errors (delete-file out))))))

(test quantize-tool-hostile-inputs
  "Every file of the bad-file corpus gives our own condition (exit 1, one
line) and no output."
  (let ((out (tmp-path "bad-out.gguf")) (seen 0))
    (dolist (bad (bad-corpus))
      (multiple-value-bind (code stdout stderr) (run-exe (list "quantize" (namestring bad) out "q8_0"))
        (declare (ignore stdout))
        (is (= 1 code) "~A exited ~D: ~A" bad code stderr)
        (is (= 1 (count #\Newline stderr)) "~A: ~S" bad stderr)
        (is (not (probe-file out)))
        (incf seen)))
    (is (< 40 seen))))

(test quantize-tool-progress-on-a-terminal
  "One line per tensor on a terminal's stderr, then the summary; nothing
on stderr when it is not a terminal."
  (with-tracked-fixture ((golden "q8_main.f32.gguf"))
    (let ((out (tmp-path "tty.gguf")))
      (unwind-protect
           (progn
             (multiple-value-bind (code output)
                 (pty-session '("expect bits per weight")
                              :args (list "quantize" (golden "q8_main.f32.gguf") out "q8_0"))
               (is (= 0 code) "~A" output)
               (is (contains output "[   1/17] output.weight") "~A" output)
               (is (contains output "blk.1.odd_8x48.weight") "~A" output)
               (is (contains output "(fall back)") "~A" output)
               (is (contains output "[  17/17]") "~A" output))
             (multiple-value-bind (code stdout stderr)
                 (run-exe (list "quantize" (golden "q8_main.f32.gguf") out "q8_0"))
               (is (= 0 code))
               (is (string= "" stderr))
               (is (contains stdout "KiB ->") "~A" stdout)))
        (ignore-errors (delete-file out))))))

(test quantize-tool-progress-in-a-log
  "Without a terminal, a tensor's line at most every RL_PROGRESS_SECONDS
(0: every tensor's) on stderr, and the summary on stdout."
  (with-tracked-fixture ((golden "q8_main.f32.gguf"))
    (let ((out (tmp-path "log.gguf")))
      (unwind-protect
           (multiple-value-bind (code stdout stderr)
               (sh "RL_PROGRESS_SECONDS=0 exec \"$0\" quantize \"$1\" \"$2\" q8_0"
                   (golden "q8_main.f32.gguf") out)
             (is (= 0 code) "~A" stderr)
             (is (= 17 (count #\Newline stderr)) "~A" stderr)
             (is (contains stderr "[   1/17] output.weight") "~A" stderr)
             (is (contains stderr "[  17/17]") "~A" stderr)
             (is (contains stdout "KiB ->") "~A" stdout))
        (ignore-errors (delete-file out))))))

(test progress-interval-reads-the-environment
  "RL_PROGRESS_SECONDS, a whole number, sets the interval; anything else
leaves *PROGRESS-INTERVAL*."
  (let ((rontolisp::*progress-interval* 7)
        (old (ext:getenv "RL_PROGRESS_SECONDS")))
    (unwind-protect
         (progn
           (ext:setenv "RL_PROGRESS_SECONDS" "0")
           (is (= 0 (rontolisp::progress-interval)))
           (ext:setenv "RL_PROGRESS_SECONDS" "often")
           (is (= 7 (rontolisp::progress-interval)))
           (ext:setenv "RL_PROGRESS_SECONDS" "-3")
           (is (= 7 (rontolisp::progress-interval))))
      (ext:setenv "RL_PROGRESS_SECONDS" old))))

;;; Split sets (llama-gguf-split's shards).

(defun write-split-set (dir &key nan)
  "DIR/whole.gguf and the same tensors as the set DIR/s-0000I-of-00002.gguf
(two tensors in each); NAN puts a NaN in the second shard.  Answers the
paths of the whole file and of the first shard."
  (let* ((state (make-random-state t))
         (m (lambda (r c) (random-matrix r c :state state)))
         (a (funcall m 64 128)) (b (funcall m 64 128)) (c (funcall m 32 64))
         (n (make-array 64 :element-type 'single-float :initial-element 1.0))
         (meta '(("general.architecture" :string "llama") ("llama.block_count" :u32 2)))
         (whole (format nil "~A/whole.gguf" dir))
         (first-shard (format nil "~A/s-00001-of-00002.gguf" dir))
         (second-shard (format nil "~A/s-00002-of-00002.gguf" dir)))
    (flet ((split (no) (list (list "split.no" :u16 no) (list "split.count" :u16 2)
                             (list "split.tensors.count" :i32 4))))
      (gguf:write whole (gguf:make-file :metadata meta
                                        :tensors (list (list "blk.0.attn_q.weight" a)
                                                       (list "blk.0.attn_norm.weight" n)
                                                       (list "blk.1.attn_q.weight" b)
                                                       (list "output.weight" c))))
      (gguf:write first-shard (gguf:make-file :metadata (append meta (split 0))
                                              :tensors (list (list "blk.0.attn_q.weight" a)
                                                             (list "blk.0.attn_norm.weight" n))))
      (gguf:write second-shard (gguf:make-file :metadata (split 1)
                                               :tensors (list (list "blk.1.attn_q.weight" b)
                                                              (list "output.weight" c))))
      (when nan
        (poke-f32-bits second-shard "output.weight" 5 #x7fc00000))
      (values whole first-shard))))

(test quantize-tool-split-sets
  "The first shard of a set stands for the set: without --keep-split the
output is the file quantizing the unsplit model gives, byte for byte;
with it, one output shard per input shard named as llama-gguf-split names
them, the first with every key and the split keys, the others with the
split keys only (as llama-quantize writes them), each tensor's bytes those
of the one-file output."
  (with-tmp-dir (dir)
    (multiple-value-bind (whole first-shard) (write-split-set dir)
      (let ((one (format nil "~A/one.gguf" dir)) (merged (format nil "~A/merged.gguf" dir)))
        (is (= 0 (run-exe (list "quantize" whole one "q8_0"))))
        (is (= 0 (run-exe (list "quantize" first-shard merged "q8_0"))))
        (is (equalp (file-octets one) (file-octets merged)))
        (multiple-value-bind (code stdout stderr)
            (run-exe (list "quantize" "--keep-split" first-shard (format nil "~A/ks.gguf" dir) "q8_0"))
          (is (= 0 code) "~A" stderr)
          (is (contains stdout "2 shards") "~A" stdout))
        (gguf:with-file (o one)
          (loop for i from 0 below 2
                for names in '(("blk.0.attn_q.weight" "blk.0.attn_norm.weight")
                               ("blk.1.attn_q.weight" "output.weight"))
                do (gguf:with-file (s (format nil "~A/ks-~5,'0D-of-00002.gguf" dir (1+ i)))
                     (is (equal names (gguf:tensor-names s)))
                     (is (eql i (gguf:value s "split.no")))
                     (is (eql 2 (gguf:value s "split.count")))
                     (is (eql 4 (gguf:value s "split.tensors.count")))
                     (is (eq (zerop i) (and (gguf:value s "general.architecture") t)))
                     (when (zerop i)
                       (is (eql 7 (gguf:value s "general.file_type"))))
                     (dolist (name names)
                       (is (equalp (gguf:tensor-octets o name) (gguf:tensor-octets s name)))))))
        (multiple-value-bind (code stdout stderr)
            (run-exe (list "quantize" (format nil "~A/s-00002-of-00002.gguf" dir) merged "q8_0"))
          (declare (ignore stdout))
          (is (= 1 code))
          (is (contains stderr "expected the first shard") "~A" stderr))))))

(test quantize-tool-hostile-split-sets
  "A set missing a shard, or with a shard of another place in it, is refused
with the GGUF:SHARD-ERROR every reader of shard sets signals, naming the
shard at fault, and nothing is written; --keep-split's split keys come in
llama-quantize's order (split.no, split.count, split.tensors.count)."
  (with-tmp-dir (dir)
    (multiple-value-bind (whole first-shard) (write-split-set dir)
      (declare (ignore whole))
      (let ((second-shard (format nil "~A/s-00002-of-00002.gguf" dir))
            (out (format nil "~A/q.gguf" dir)))
        (rontolisp:quantize-file first-shard out :keep-split t)
        (gguf:with-file (s (format nil "~A/q-00002-of-00002.gguf" dir))
          ;; those three alone, as llama-quantize writes a later shard
          (is (equal '(("split.no" :u16 1) ("split.count" :u16 2) ("split.tensors.count" :i32 4))
                     (gguf:metadata s))))
        (dolist (f (directory (format nil "~A/q*" dir))) (delete-file f))
        (gguf:with-file (s second-shard)
          (gguf:write out (gguf:make-file :metadata (gguf:split-metadata 0 2 4)
                                          :tensors (mapcar (lambda (n) (list n (gguf:tensor s n)))
                                                           (gguf:tensor-names s)))))
        (rename-file out second-shard :if-exists :supersede)
        (flet ((refusal (&rest keys)
                 (handler-case (progn (apply #'rontolisp:quantize-file first-shard out keys) nil)
                   (gguf:shard-error (c) c))))
          (let ((c (refusal)))
            (is (typep c 'gguf:foreign-shard-error))
            (is (search "s-00002-of-00002.gguf" (princ-to-string c)) "~A" c))
          (delete-file second-shard)
          (let ((c (refusal :keep-split t)))
            (is (typep c 'gguf:missing-shard-error))
            (is (search "s-00002-of-00002.gguf" (princ-to-string c)) "~A" c)))
        (is (null (directory (format nil "~A/q*" dir))))))))

(test quantize-tool-removes-temporaries-of-ended-runs
  "The temporary file a SIGKILLed quantize left beside OUT is removed by
the next write of OUT, with a note on stderr, once its process has ended;
one of a living process stays."
  (with-tmp-dir (dir)
    (let* ((out (format nil "~A/q.gguf" dir))
           (dead (dead-pid))
           (stale (format nil "~A.rontolisp-tmp.~D.0" out dead))
           (live (format nil "~A.rontolisp-tmp.1.0" out)))
      (write-file-string stale "x")
      (write-file-string live "x")
      (multiple-value-bind (code stdout stderr)
          (run-exe (list "quantize" (golden "q8_main.f32.gguf") out "q8_0"))
        (declare (ignore stdout))
        (is (= 0 code))
        (is (contains stderr (format nil "rontolisp: removed ~A, a temporary file of process ~D, ~
which has ended" stale dead))
            "~A" stderr))
      (is (null (probe-file stale)))
      (is (probe-file live)))))

(test quantize-tool-split-failure-removes-every-shard
  (with-tmp-dir (dir)
    (multiple-value-bind (whole first-shard) (write-split-set dir :nan t)
      (declare (ignore whole))
      (let ((out (format nil "~A/ks.gguf" dir)))
        (multiple-value-bind (code stdout stderr)
            (run-exe (list "quantize" "--keep-split" first-shard out "q8_0"))
          (declare (ignore stdout))
          (is (= 1 code))
          (is (contains stderr "output.weight") "~A" stderr))
        (is (null (directory (format nil "~A/ks*" dir))))
        (is (null (directory (format nil "~A/*rontolisp-tmp*" dir))))))))

(test quantize-tool-split-failure-keeps-an-older-set-whole
  "A --keep-split run that fails in its second shard replaces none of an
older set of shards under the same names: they are written under
temporary names and renamed together."
  (with-tmp-dir (dir)
    (multiple-value-bind (whole first-shard) (write-split-set dir :nan t)
      (declare (ignore whole))
      (let ((old (loop for i from 1 to 2
                       collect (format nil "~A/ks-~5,'0D-of-00002.gguf" dir i))))
        (loop for path in old for i from 0
              do (with-open-file (s path :direction :output :element-type '(unsigned-byte 8))
                   (write-sequence (make-array 8 :element-type '(unsigned-byte 8)
                                                 :initial-element i)
                                   s)))
        (is (= 1 (run-exe (list "quantize" "--keep-split" first-shard
                                (format nil "~A/ks.gguf" dir) "q8_0"))))
        (loop for path in old for i from 0
              do (is (equalp (make-array 8 :element-type '(unsigned-byte 8) :initial-element i)
                             (file-octets path))
                     "~A was replaced" path))
        (is (null (directory (format nil "~A/*rontolisp-tmp*" dir))))))))

(test quantize-tool-reads-the-mapping-when-the-file-changed
  "Values are read from the file while it is the one mapped; once the
path names another file (replaced after reading), the mapping is read: the
bytes written are those of the file as read, either way."
  (with-tracked-fixture ((golden "q8_main.f32.gguf"))
    (let ((in (tmp-path "m.gguf")) (other (tmp-path "other.gguf"))
          (out (tmp-path "m.q8.gguf")) (ref (tmp-path "m.ref.gguf")))
      (unwind-protect
           (progn
             (write-octets-file in (file-octets (golden "q8_main.f32.gguf")))
             (rontolisp:quantize-file in ref)
             (dolist (replace '(nil t))
               (gguf:with-file (f in)
                 (when replace
                   (write-octets-file other (file-octets (golden "q8_align64.f32.gguf")))
                   (delete-file in) ; the mapping keeps the file read alive
                   (rename-file other in))
                 (let ((names (command-line::llama-tensor-order (gguf:tensor-names f))))
                   (gguf:with-file (r ref)
                     (gguf:write out (gguf:make-file
                                      :metadata (gguf:metadata r) :alignment (gguf:alignment r)
                                      :implicit-alignment t
                                      :tensors (loop for name in names
                                                     for info = (gguf:tensor-info r name)
                                                     collect (list name :stream
                                                                   :type (gguf:tensor-info-type-id info)
                                                                   :dims (gguf:tensor-info-dims info))))
                                 :stream (lambda (w)
                                           (dolist (name names)
                                             (gguf:stream-put-tensor
                                              w f name
                                              :type (gguf:tensor-info-type-id (gguf:tensor-info r name)))))))))
               (is (equalp (file-octets ref) (file-octets out)) "replaced ~A: bytes differ" replace)))
        (dolist (p (list in other out ref)) (ignore-errors (delete-file p)))))))

(test quantize-tool-keep-split-writes-where-it-is-told
  "--keep-split with a relative OUT (sub/x.gguf, sub/sub/ present too)
writes sub/x-0000I-of-00002.gguf, never sub/sub/...; a set and an output
of non-ASCII names are read and written under their UTF-8 bytes."
  (with-tmp-dir (dir)
    (multiple-value-bind (whole first-shard) (write-split-set dir)
      (declare (ignore whole first-shard))
      (sh "mkdir -p \"$1/sub/sub\" && mv \"$1/s-00001-of-00002.gguf\" \"$1/$2\" && mv \"$1/s-00002-of-00002.gguf\" \"$1/$3\""
          dir (native-arg "ém-00001-of-00002.gguf") (native-arg "ém-00002-of-00002.gguf"))
      (multiple-value-bind (code stdout stderr)
          (sh "cd \"$1\" && \"$0\" quantize --keep-split \"$2\" sub/x.gguf q8_0" dir
              (native-arg "ém-00001-of-00002.gguf"))
        (is (= 0 code) "~A ~A" stdout stderr))
      (is (equal '("sub" "x-00001-of-00002.gguf" "x-00002-of-00002.gguf")
                 (names-in (format nil "~A/sub" dir))))
      (is (null (names-in (format nil "~A/sub/sub" dir))))
      (multiple-value-bind (code stdout stderr)
          (sh "cd \"$1\" && LANG=C.UTF-8 \"$0\" quantize --keep-split \"$2\" \"$3\" q8_0" dir
              (native-arg "ém-00001-of-00002.gguf") (native-arg "sub/qé.gguf"))
        (is (= 0 code) "~A ~A" stdout stderr))
      (is (equal '("qé-00001-of-00002.gguf" "qé-00002-of-00002.gguf" "sub"
                   "x-00001-of-00002.gguf" "x-00002-of-00002.gguf")
                 (names-in (format nil "~A/sub" dir))))
      (sh "rm -rf \"$1/sub\"; rm -f \"$1\"/*" dir))))

(test quantize-tool-names-the-shard-at-fault
  "A NaN in the second shard of a set is reported in that shard, at its
byte offset in that shard (with or without --keep-split)."
  (with-tmp-dir (dir)
    (multiple-value-bind (whole first-shard) (write-split-set dir :nan t)
      (declare (ignore whole))
      (let ((second-shard (format nil "~A/s-00002-of-00002.gguf" dir)))
        (dolist (keep '(nil t))
          (multiple-value-bind (code stdout stderr)
              (run-exe (append (list "quantize" first-shard (format nil "~A/q.gguf" dir) "q8_0")
                               (and keep (list "--keep-split"))))
            (declare (ignore stdout))
            (is (= 1 code))
            (is (contains stderr (format nil "~A: tensor \"output.weight\"" second-shard)) "~A" stderr)
            (let* ((at (search "(byte " stderr))
                   (byte (and at (parse-integer stderr :start (+ at 6) :junk-allowed t))))
              (is (and byte (equalp #(0 0 #xc0 #x7f) (octets-at (file-octets second-shard) byte 4)))
                  "the NaN is not at the byte named: ~A" stderr))))))))

(test quantize-tool-plan-lines-escape-tensor-names
  "--dry-run's lines and the progress lines name each tensor escaped as
inspect prints names: a newline or an escape sequence in a name once broke
the line or reached the terminal."
  (let ((in (tmp-path "plan-names.gguf")) (out (tmp-path "plan-names-out.gguf"))
        (name (format nil "odd~%blk.0.ffn_up~C[2J.weight" (code-char 27))))
    (gguf:write in (gguf:make-file :tensors (list (list name (vec-random-matrix 4 64 1.0
                                                                                (make-random-state t))))))
    (unwind-protect
         (multiple-value-bind (code stdout err) (run-exe (list "quantize" "--dry-run" in out "q8_0"))
           (is (= 0 code) "~A" err)
           (is (contains stdout "odd\\nblk.0.ffn_up\\u001b[2J.weight") "~A" stdout)
           (is (not (find (code-char 27) stdout)) "~A" stdout)
           (is (not (contains stdout name)) "~A" stdout))
      (ignore-errors (delete-file in))
      (ignore-errors (delete-file out)))))
