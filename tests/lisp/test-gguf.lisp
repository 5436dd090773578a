;;;; test-gguf.lisp - GGUF from Lisp: every golden file reads and agrees with
;;;; gguf-py's dump, round trips are byte-identical, the bad-file corpus is
;;;; refused cleanly, Q8_0 tensors are zero-copy quantized matrices.  The
;;;; inspect command's tests are in test-inspect.lisp.

(in-package "RONTOLISP-TESTS")

(def-suite gguf :in all :description "Reading and writing GGUF files.")
(in-suite gguf)

(defparameter *golden-gguf*
  `("q8_main.f32.gguf" "q8_main.q8_0.gguf" "q8_f16src.f16.gguf" "q8_f16src.q8_0.gguf"
    "q8_bf16src.bf16.gguf" "q8_bf16src.q8_0.gguf" "q8_overflow.f32.gguf" "q8_nan.f32.gguf"
    "q8_align64.f32.gguf"
    "vocab/ggml-vocab-bert-bge.gguf" "vocab/ggml-vocab-llama-spm.gguf"
    "vocab/ggml-vocab-deepseek-coder.gguf" "vocab/ggml-vocab-starcoder.gguf"
    "vocab/ggml-vocab-gpt-2.gguf" "vocab/ggml-vocab-falcon.gguf"
    ,@(quant-golden-files))
  "Every golden GGUF file our reader must read (q8_align64.q8_0.gguf, whose
layout is broken, is tested separately).")

(defun json-scalar-equal (ours theirs type)
  "Our Lisp value against gguf-py's JSON value for a scalar of TYPE."
  (cond ((string= type "bool") (eq (if ours t nil) theirs))
        ((string= type "f32") (and (realp theirs) (= ours (float theirs 1.0))))
        ((string= type "f64") (and (realp theirs) (= ours (float theirs 1d0))))
        ((string= type "string") (equal ours theirs))
        (t (eql ours theirs))))

(defun kv-agrees (entry kv)
  "Does our metadata ENTRY (key type value) agree with gguf-py's KV dump?"
  (destructuring-bind (key type value) entry
    (let ((their-type (our-type-name (gethash "type" kv))))
      (and (string= key (gethash "key" kv))
           (if (consp type)
               (let* ((elem (string-downcase (symbol-name (second type))))
                      (their-elem (our-type-name (gethash "array_type" kv)))
                      (n (length value)))
                 (and (string= "array" their-type)
                      (string= elem their-elem)
                      (= n (gethash "length" kv))
                      (multiple-value-bind (values present) (gethash "values" kv)
                        (if present
                            (every (lambda (a b) (json-scalar-equal a b elem)) value values)
                            (and (every (lambda (a b) (json-scalar-equal a b elem))
                                        (subseq value 0 8) (gethash "head" kv))
                                 (every (lambda (a b) (json-scalar-equal a b elem))
                                        (subseq value (- n 8)) (gethash "tail" kv)))))))
               (and (string= (string-downcase (symbol-name type)) their-type)
                    (json-scalar-equal value (gethash "value" kv) their-type)))))))

(test gguf-reads-every-golden-file-as-gguf-py-does
  (dolist (name *golden-gguf*)
    (with-tracked-fixture ((golden name))
      (let ((json (golden-json name)))
        (gguf:with-file (f (golden name))
          (is (= (gethash "version" json) (gguf:version f)) "~A version" name)
          (is (= (gethash "alignment" json) (gguf:alignment f)) "~A alignment" name)
          (is (= (gethash "data_offset" json) (gguf:data-offset f)) "~A data offset" name)
          (is (= (gethash "file_size" json) (gguf:file-size f)) "~A size" name)
          (is (= (gethash "kv_count" json) (length (gguf:metadata f))) "~A kv count" name)
          (is (every #'kv-agrees (gguf:metadata f) (gethash "kv" json))
              "~A: metadata differs from gguf-py's" name)
          (is (= (length (gethash "tensors" json)) (length (gguf:tensor-infos f))))
          (is (every (lambda (info tj)
                       (and (string= (gguf:tensor-info-name info) (gethash "name" tj))
                            (equal (gguf:tensor-info-dims info) (gethash "ne" tj))
                            (equal (gguf:tensor-info-shape info) (reverse (gethash "ne" tj)))
                            (= (gguf:tensor-info-type-id info) (gethash "type_id" tj))
                            (string= (gguf:tensor-info-type info) (gethash "type_name" tj))
                            (= (gguf:tensor-info-offset info) (gethash "offset" tj))
                            (= (gguf:tensor-info-bytes info) (gethash "nbytes" tj))))
                     (gguf:tensor-infos f) (gethash "tensors" json))
              "~A: tensor table differs from gguf-py's" name))))))

(test gguf-bad-corpus-signals-gguf-error
  (let ((bad '()))
    (dolist (f (bad-corpus))
      (let ((c (handler-case (progn (gguf:close (gguf:read f)) nil)
                 (gguf:gguf-error (c) c))))
        (unless (and c (gguf:gguf-error-reason c) (integerp (gguf:gguf-error-offset c))
                     (typep c 'rontolisp:rontolisp-error))
          (push (file-namestring f) bad))))
    (is (null bad) "not refused with a gguf-error: ~S" bad)))

(test gguf-missing-file-signals
  (signals gguf:gguf-error (gguf:read "/nonexistent/file.gguf")))

(test gguf-round-trip-is-byte-identical
  (dolist (name '("q8_main.q8_0.gguf" "q8_f16src.q8_0.gguf" "q8_bf16src.q8_0.gguf"
                  "q8_main.f32.gguf" "q8_f16src.f16.gguf" "q8_bf16src.bf16.gguf"
                  "q8_align64.f32.gguf" "vocab/ggml-vocab-llama-spm.gguf"))
    (with-tracked-fixture ((golden name))
      (let ((out (tmp-path "rt.gguf")))
        (gguf:with-file (f (golden name))
          (gguf:write out f))
        (is (equalp (file-octets (golden name)) (file-octets out)) "~A differs after a round trip" name)
        (delete-file out)))))

(test gguf-round-trip-keeps-invalid-utf8
  "gguf:read then gguf:write gives back a file whose keys, strings, token
array and tensor name are not UTF-8, byte for byte; such bytes read as
U+DC80..U+DCFF."
  (let ((in (tmp-path "bytes.gguf")) (out (tmp-path "bytes-rt.gguf"))
        (file (invalid-utf8-gguf)))
    (write-octets-file in file)
    (gguf:with-file (f in)
      (is (string= (map 'string #'code-char '(109 #xdcff 120)) (gguf:value f "general.name")))
      (gguf:write out f))
    (is (equalp file (file-octets out)))
    (delete-file in)
    (delete-file out)))

(test gguf-round-trip-keeps-nested-arrays
  "Arrays of arrays, empty ones and ones whose inner arrays differ in type
included, are written back byte for byte."
  (let ((in (tmp-path "nested.gguf")) (out (tmp-path "nested-rt.gguf"))
        (file (nested-arrays-gguf)))
    (write-octets-file in file)
    (gguf:with-file (f in)
      (is (equal '(:array (:array :u32) (:array :string) (:array (:array :f32)))
                 (gguf:value-type f "n.mixed")))
      (is (equal '(:array :array) (gguf:value-type f "n.empty")))
      (gguf:write out f))
    (is (equalp file (file-octets out)))
    (delete-file in)
    (delete-file out)))

(test gguf-make-file-refuses-f32-values-beyond-range
  "An f32 value given as a double-float beyond the f32 range would be
written as an infinity: refused, naming the key."
  (let ((e (handler-case (gguf:make-file :metadata '(("general.big" :f32 1d300)))
             (error (e) e))))
    (is (typep e 'gguf:gguf-error))
    (is (contains (princ-to-string e) "\"general.big\"") "~A" e)
    (is (contains (princ-to-string e) "f32 range") "~A" e))
  (finishes (gguf:make-file :metadata `(("a" :f32 1d30) ("b" :f32 ,(- most-positive-single-float))
                                        ("c" :f64 1d300)))))

(test gguf-every-value-type-reads-back
  (let* ((path (tmp-path "all.gguf"))
         (md `(("u8" :u8 255) ("i8" :i8 -128) ("u16" :u16 65535) ("i16" :i16 -32768)
               ("u32" :u32 4294967295) ("i32" :i32 -2147483648)
               ("u64" :u64 18446744073709551615) ("i64" :i64 -9223372036854775808)
               ("f32" :f32 1.5e-7) ("f64" :f64 2.718281828459045d0)
               ("t" :bool t) ("nil" :bool nil) ("s" :string "héllo ✓") ("empty" :string "")
               ("a-u8" (:array :u8) ,(coerce #(1 2 3) '(vector (unsigned-byte 8))))
               ("a-i64" (:array :i64) #(-1 0 1))
               ("a-f32" (:array :f32) ,(coerce #(0.5 -1.25) '(vector single-float)))
               ("a-f64" (:array :f64) #(1d0 -2d0))
               ("a-bool" (:array :bool) #(t nil t))
               ("a-str" (:array :string) #("x" "" "zz"))
               ("a-empty" (:array :u32) #())
               ("nested" (:array (:array :i32)) #(#(1 2) #() #(3)))
               ("general.alignment" :u32 64)))
         (w (make-array '(2 32) :element-type 'single-float :initial-element 0.5)))
    (gguf:write path (gguf:make-file :metadata md
                                     :tensors `(("w" ,w)
                                                ("q" ,(rontolisp:quantize w 'q8-0))
                                                ("h" ,(rontolisp:make-float16-array w))
                                                ("b" ,(rontolisp:make-bfloat16-array w))
                                                ("flat" ,w :dims (64)))))
    (gguf:with-file (f path)
      (is (= 64 (gguf:alignment f)))
      (is (equal (mapcar #'first md) (gguf:keys f)))
      (loop for (key type value) in md
            do (multiple-value-bind (v ty found) (gguf:value f key)
                 (is (eq t found))
                 (is (equalp type ty) "~A: type ~S read back as ~S" key type ty)
                 (is (equalp value v) "~A: ~S read back as ~S" key value v)))
      (is (equalp w (gguf:tensor f "w")))
      (is (equalp (matrix-octets (rontolisp:quantize w 'q8-0)) (matrix-octets (gguf:tensor f "q"))))
      (is (equalp (rontolisp:half-array-bits (rontolisp:make-float16-array w))
                  (rontolisp:half-array-bits (gguf:tensor f "h"))))
      (is (rontolisp:bfloat16-array-p (gguf:tensor f "b")))
      (is (equal '(64) (gguf:tensor-info-dims (gguf:tensor-info f "flat"))))
      (is (every (lambda (info) (zerop (mod (gguf:tensor-info-offset info) 64)))
                 (gguf:tensor-infos f))))
    (delete-file path)))

(test gguf-edit-file-renames-and-writes
  ;; EDIT-FILE gives a file read from disk new metadata and tensor names:
  ;; lookups by name see the new names, and WRITE writes them.
  (let ((in (tmp-path "edit-in.gguf"))
        (out (tmp-path "edit-out.gguf"))
        (w (make-array '(2 32) :element-type 'single-float :initial-element 0.25)))
    (gguf:write in (gguf:make-file :metadata '(("general.name" :string "before"))
                                   :tensors `(("a" ,w) ("b" ,w))))
    (gguf:with-file (f in)
      (is (gguf:tensor-info f "a"))
      (is (eq f (gguf:edit-file f '(("general.name" :string "after")) '("c" "d"))))
      (signals gguf:gguf-error (gguf:tensor-info f "a"))
      (is (equal "c" (gguf:tensor-info-name (gguf:tensor-info f "c"))))
      (gguf:write out f))
    (gguf:with-file (f out)
      (is (equal "after" (gguf:value f "general.name")))
      (is (equal '("c" "d") (gguf:tensor-names f)))
      (is (equalp w (gguf:tensor f "d"))))
    (delete-file in)
    (delete-file out)))

(test gguf-tensor-info-file-offset
  ;; A tensor's offset in its file is the data section's plus its own.
  (let ((path (tmp-path "offsets.gguf"))
        (w (make-array 64 :element-type 'single-float :initial-element 1.0)))
    (gguf:write path (gguf:make-file :tensors `(("a" ,w) ("b" ,w))))
    (gguf:with-file (f path)
      (dolist (info (gguf:tensor-infos f))
        (is (= (+ (gguf:data-offset f) (gguf:tensor-info-offset info))
               (gguf:tensor-info-file-offset info)))))
    (delete-file path)))

(test gguf-alignment-key-always-written
  (let ((path (tmp-path "align.gguf")))
    (gguf:write path (gguf:make-file :metadata '(("general.name" :string "x"))))
    (gguf:with-file (f path)
      (is (equal '("general.name" "general.alignment") (gguf:keys f)))
      (is (= 32 (gguf:value f "general.alignment"))))
    (delete-file path)))

(test gguf-tensor-zero-copy-q8-0
  (with-tracked-fixture ((golden "q8_main.q8_0.gguf"))
    (let* ((in-json (golden-json "q8_main.f32.gguf"))
           (src (golden-source-array "q8_main.f32.gguf" in-json
                                     (json-tensor in-json "blk.0.gauss_8x64.weight")))
           (f (gguf:read (golden "q8_main.q8_0.gguf")))
           (m (gguf:tensor f "blk.0.gauss_8x64.weight")))
      (is (rontolisp:quantized-matrix-p m))
      (is (equal '(8 64) (array-dimensions m)))
      (is (equalp (matrix-octets (rontolisp:quantize src 'q8-0)) (matrix-octets m)))
      (is (= (aref (rontolisp:dequantize (rontolisp:quantize src 'q8-0)) 3 7) (aref m 3 7)))
      (let ((e (gguf:tensor f "blk.0.experts_3d.weight")))
        (is (equal '(2 4 64) (array-dimensions e))))
      (is (typep (gguf:tensor f "output_norm.weight") '(simple-array single-float (64))))
      (is (rontolisp:float16-array-p (gguf:tensor f "blk.1.odd_8x48.weight")))
      (signals gguf:gguf-error (gguf:tensor f "no.such.tensor"))
      (gguf:close f)
      (signals gguf:file-closed-error (aref m 0 0))
      (signals gguf:file-closed-error (rontolisp:dequantize m))
      (signals gguf:file-closed-error (gguf:tensor f "output.weight"))
      (gguf:close f))))

;;; Raw tensors: a synthetic file with a tensor of every ggml type id that
;;; has a block layout, two rows of two blocks each, bytes that differ per
;;; type and per position.

(test gguf-every-type-copies-byte-identical
  (let* ((tensors (every-type-tensors))
         (a (tmp-path "every-a.gguf")) (b (tmp-path "every-b.gguf")) (c (tmp-path "every-c.gguf")))
    (is (< 30 (length tensors)))
    (gguf:write a (gguf:make-file :metadata '(("general.name" :string "every type"))
                                  :tensors tensors))
    (gguf:with-file (f a)
      (is (equal (mapcar (lambda (tn) (getf (cddr tn) :type)) tensors)
                 (mapcar #'gguf:tensor-info-type-id (gguf:tensor-infos f))))
      (dolist (tn tensors)
        (is (equalp (second tn) (gguf:tensor-octets f (first tn))) "~A's bytes differ" (first tn)))
      (gguf:write b f)
      (gguf:write c (gguf:make-file
                     :metadata (gguf:metadata f)
                     :tensors (loop for ti in (gguf:tensor-infos f)
                                    collect (list (gguf:tensor-info-name ti)
                                                  (gguf:tensor-octets f (gguf:tensor-info-name ti))
                                                  :type (gguf:tensor-info-type ti)
                                                  :dims (gguf:tensor-info-dims ti))))))
    (is (equalp (file-octets a) (file-octets b)) "gguf:write of the read file differs")
    (is (equalp (file-octets a) (file-octets c)) "the copy through tensor-octets differs")
    (mapc #'delete-file (list a b c))))

(test gguf-tensor-octets-is-a-view-that-outlives-close
  (let ((path (tmp-path "view.gguf"))
        (tensors (every-type-tensors)))
    (gguf:write path (gguf:make-file :tensors tensors))
    (let* ((f (gguf:read path))
           (q4k (find "t.Q4_K" tensors :key #'first :test #'string=))
           (view (gguf:tensor-octets f "t.Q4_K")))
      (is (typep view '(simple-array (unsigned-byte 8) (*))))
      (gguf:close f)
      (is (equalp (second q4k) view))
      (signals gguf:file-closed-error (gguf:tensor-octets f "t.Q4_K")))
    (delete-file path)))

(test gguf-make-file-checks-raw-tensor-blocks
  (flet ((raw (n type dims)
           (gguf:make-file :tensors `(("x" ,(make-array n :element-type '(unsigned-byte 8))
                                           :type ,type :dims ,dims)))))
    (is (gguf:gguf-file-p (raw 144 "Q4_K" '(256))))
    (is (gguf:gguf-file-p (raw 288 12 '(256 2))))
    (signals gguf:gguf-error (raw 144 "Q4_K" '(128)))     ; not a whole block
    (signals gguf:gguf-error (raw 143 "Q4_K" '(256)))     ; one byte short
    (signals gguf:gguf-error (raw 16 "Q4_0_4_4" '(32)))   ; removed from ggml
    (signals gguf:gguf-error (raw 16 "NOPE" '(32)))
    (signals gguf:gguf-error (raw 16 "Q8_0" nil))))

(test gguf-unsupported-tensor-type-signals
  (let ((path (tmp-path "iq2.gguf")))
    (gguf:write path (gguf:make-file
                      :tensors `(("q" ,(make-array 66 :element-type '(unsigned-byte 8))
                                      :type "IQ2_XXS" :dims (256)))))
    (gguf:with-file (f path)
      (is (string= "IQ2_XXS" (gguf:tensor-info-type (gguf:tensor-info f "q"))))
      (let ((e (handler-case (progn (gguf:tensor f "q") nil) (gguf:gguf-error (e) e))))
        (is (typep e 'gguf:gguf-error))
        (is (search "found IQ2_XXS" (princ-to-string e))))
      (is (= 66 (length (gguf:tensor-octets f "q")))))
    (delete-file path))
  (is (string= "other 999" (gguf:type-name 999))))

;;; The dequantized types.  The expected values are computed here from
;;; doc/formats.md §3 and §4 (the C kernels are held to ggml's by
;;; tests/c/test_quants.c); these tests pin the glue: element order, shape,
;;; the single-float result, and every listed type answering.

(defun random-octets (n)
  (let ((v (make-array n :element-type '(unsigned-byte 8))))
    (dotimes (i n v) (setf (aref v i) (random 256)))))

(defun set-f16 (v at value)
  "Store VALUE as little-endian binary16 at byte AT of V; answers its f32."
  (let ((bits (rontolisp:f16-bits value)))
    (setf (aref v at) (ldb (byte 8 0) bits) (aref v (1+ at)) (ldb (byte 8 8) bits))
    (rontolisp:f16-value bits)))

(defun q4-0-reference (v nblocks)
  "doc/formats.md §3: (q - 8) * d, value j in the low nibble of qs[j], j+16 high."
  (let ((out (make-array (* 32 nblocks) :element-type 'single-float)))
    (dotimes (b nblocks out)
      (let* ((base (* b 18))
             (d (rontolisp:f16-value (logior (aref v base) (ash (aref v (1+ base)) 8)))))
        (dotimes (j 16)
          (let ((byte (aref v (+ base 2 j))))
            (setf (aref out (+ (* 32 b) j)) (* (float (- (ldb (byte 4 0) byte) 8) 1.0) d)
                  (aref out (+ (* 32 b) j 16)) (* (float (- (ldb (byte 4 4) byte) 8) 1.0) d))))))))

(defun q4-k-reference (v)
  "doc/formats.md §4 for one Q4_K super-block: (d*sc)*q - (dmin*m)."
  (flet ((f16-at (at) (rontolisp:f16-value (logior (aref v at) (ash (aref v (1+ at)) 8))))
         (s (k) (aref v (+ 4 k))))
    (let ((d (f16-at 0)) (dmin (f16-at 2))
          (out (make-array 256 :element-type 'single-float)))
      (dotimes (i 256 out)
        (multiple-value-bind (g r) (floor i 64)
          (multiple-value-bind (h l) (floor r 32)
            (let* ((j (+ (* 2 g) h))
                   (sc (if (< j 4) (ldb (byte 6 0) (s j))
                           (logior (ldb (byte 4 0) (s (+ j 4))) (ash (ldb (byte 2 6) (s (- j 4))) 4))))
                   (m (if (< j 4) (ldb (byte 6 0) (s (+ j 4)))
                          (logior (ldb (byte 4 4) (s (+ j 4))) (ash (ldb (byte 2 6) (s j)) 4))))
                   (byte (aref v (+ 16 (* 32 g) l)))
                   (q (if (zerop h) (ldb (byte 4 0) byte) (ldb (byte 4 4) byte))))
              (setf (aref out i) (- (* (* d (float sc 1.0)) (float q 1.0))
                                    (* dmin (float m 1.0)))))))))))

(test gguf-tensor-dequantizes-q4-0-and-q4-k
  (let* ((path (tmp-path "dequant.gguf"))
         (*random-state* (make-random-state 25)) ; ECL seeds a state from an integer
         (q40 (random-octets (* 18 6)))
         (q4k (random-octets 144)))
    (dotimes (b 6) (set-f16 q40 (* 18 b) (- (random 2.0) 1.0)))
    (set-f16 q4k 0 0.0123) (set-f16 q4k 2 0.0031)
    (gguf:write path (gguf:make-file
                      :tensors `(("a" ,q40 :type "Q4_0" :dims (64 3))
                                 ("k" ,q4k :type "Q4_K" :dims (256)))))
    (gguf:with-file (f path)
      (let ((a (rontolisp:dequantize (gguf:tensor f "a")))
            (k (rontolisp:dequantize (gguf:tensor f "k")))
            (ra (q4-0-reference q40 6)) (rk (q4-k-reference q4k)))
        (is (typep a '(simple-array single-float (3 64))))
        (is (typep k '(simple-array single-float (256))))
        (is (loop for i below 192 always (= (row-major-aref a i) (aref ra i)))
            "Q4_0 differs from doc/formats.md §3")
        (is (every #'= k rk) "Q4_K differs from doc/formats.md §4")))
    (delete-file path)))

(test gguf-tensor-dequantizes-every-listed-type
  (let ((path (tmp-path "dequant-all.gguf"))
        (names '("Q4_0" "Q4_1" "Q5_0" "Q5_1" "Q2_K" "Q3_K" "Q4_K" "Q5_K" "Q6_K"
                 "IQ4_NL" "IQ4_XS")))
    ;; zero bytes: every scale 0, so every value is 0 (-0 for the types
    ;; whose min is subtracted)
    (gguf:write path (gguf:make-file
                      :tensors (loop for name in names
                                     for id = (loop for i below 64
                                                    when (equal name (rontolisp::%ggml-type i))
                                                      return i)
                                     collect (multiple-value-bind (nm block bytes)
                                                 (rontolisp::%ggml-type id)
                                               (declare (ignore nm))
                                               (list name (make-array (* 2 bytes) :element-type '(unsigned-byte 8)
                                                                       :initial-element 0)
                                                     :type id :dims (list block 2))))))
    (gguf:with-file (f path)
      (dolist (name names)
        (let ((x (rontolisp:dequantize (gguf:tensor f name)))
              (block (second (multiple-value-list
                              (rontolisp::%ggml-type (gguf:tensor-info-type-id (gguf:tensor-info f name)))))))
          (is (typep x `(simple-array single-float (2 ,block))) "~A: ~S" name (type-of x))
          (is (every #'zerop (make-array (* 2 block) :element-type 'single-float :displaced-to x))
              "~A: a zero block is not all zeros" name))))
    (delete-file path)))

(test gguf-writer-leaves-no-file-on-failure
  (let ((path "/nonexistent-dir/out.gguf"))
    (signals gguf:gguf-error (gguf:write path (gguf:make-file)))
    (is (null (probe-file path))))
  (signals gguf:gguf-error (gguf:make-file :metadata '(("k" :u8 300))))
  (signals gguf:gguf-error (gguf:make-file :metadata '(("" :u8 1))))
  (signals gguf:gguf-error (gguf:make-file :metadata '(("k" :float 1.0))))
  (signals gguf:gguf-error (gguf:make-file :tensors '(("t" #(1 2 3)))))
  (let ((path (tmp-path "dup.gguf"))
        (w (make-array 32 :element-type 'single-float)))
    (signals gguf:gguf-error (gguf:write path (gguf:make-file :tensors `(("t" ,w) ("t" ,w)))))
    (is (null (probe-file path)))))

;;; gguf:close while other threads run kernels on the file's tensors: each
;;; kernel either finishes on the mapping (close defers the unmap to the
;;; last running one) or signals gguf:file-closed-error; never a crash,
;;; never another error.  Unpinned, this crashed within a few rounds.

(defun close-race-worker (matrix-cell stop op)
  "A thread body running OP on the matrix in MATRIX-CELL until STOP's car
is true; answers (values runs closed-errors other-conditions)."
  (lambda ()
    (let ((runs 0) (closed 0) (other '()))
      (loop until (car stop)
            do (handler-case (progn (funcall op (car matrix-cell)) (incf runs))
                 (gguf:file-closed-error () (incf closed))
                 (serious-condition (c) (push (princ-to-string c) other))))
      (list runs closed other))))

(test gguf-close-while-threads-run-kernels
  (let* ((path (tmp-path "race.gguf"))
         (rows 256) (cols 1024)
         (a (let ((a (make-array (list rows cols) :element-type 'single-float)))
              (dotimes (i (array-total-size a) a)
                (setf (row-major-aref a i) (float (- (mod (* i 7) 61) 30) 1.0)))))
         (x (make-array cols :element-type 'single-float :initial-element 0.25))
         (expected (vec:matvec (rontolisp:quantize a 'q8-0) x))
         (ops (list (lambda (m) (assert (equalp expected (vec:matvec m x))))
                    (lambda (m) (linalg:row m 100))
                    (lambda (m) (rontolisp:dequantize m))
                    (lambda (m) (dotimes (i 64) (aref m (mod (* i 37) rows) i)))
                    (lambda (m) (rontolisp:quantized-matrix-octets m))))
         (stop (list nil))
         (file (progn (gguf:write path (gguf:make-file
                                        :tensors (list (list "w" (rontolisp:quantize a 'q8-0)))))
                      (gguf:read path)))
         (cell (list (gguf:tensor file "w")))
         (threads (loop for op in ops
                        collect (mp:process-run-function "close-race"
                                                         (close-race-worker cell stop op)))))
    (unwind-protect
         (dotimes (round 300)
           (let ((next (gguf:read path)))
             (setf (car cell) (gguf:tensor next "w"))
             (when (zerop (mod round 50)) (ext:gc t)) ; the collector among the threads
             (sleep 0.001)
             (gguf:close file)
             (setf file next)))
      (setf (car stop) t)
      (let ((results (mapcar #'mp:process-join threads)))
        (gguf:close file)
        (ignore-errors (delete-file path))
        (loop for (runs closed other) in results
              do (is (plusp runs))
                 (is (null other) "a worker got ~S" (first other)))
        ;; the race was really run: some kernel met a closed file
        (is (plusp (reduce #'+ results :key #'second)))))))
