;;;; bench-products.lisp - `rontolisp bench FILE''s products in the file's
;;;; own types: for each type and shape of the file's 2-D quantized tensors,
;;;; one matrix-vector product as the encoder would run it on one thread
;;;; (the activation row quantized to the type's activation blocks, then
;;;; every row's product), beside the same rows as f32 (dequantized once,
;;;; outside the timing) and llama.cpp's own product of the same bytes
;;;; (ggml's CPU type traits, from its libraries when they are found).
;;;;
;;;; Tensors of one type and shape are timed once ("x N tensors").  Speed
;;;; is reported, never checked; what is checked on every run is that the
;;;; timed product gives the scalar reference's bits, so that a wrong
;;;; product is never timed.

(in-package "COMMAND-LINE")

(defparameter *bench-products-min-ns* 100000000
  "Each product is repeated for at least this many nanoseconds (and at
least --iters calls), so that the median of a product of a few
microseconds rests on many calls.")

(defstruct (bench-product (:constructor make-bench-product (type rows cols bytes)))
  "One type and shape of a file's matrices (BYTES: one matrix's in its
type) and its measurements, times in nanoseconds (NIL where not
measured)."
  type rows cols bytes (names '()) ours f32 ggml (calls nil) (note nil))

(defun bench-product-groups (f)
  "The 2-D tensors of the GGUF file F of quantized types (Q8_0, the legacy,
K and IQ4 types), one BENCH-PRODUCT per type and shape with the names of its
tensors, by type (in id order), then by size."
  (let ((groups '()))
    (dolist (info (gguf:tensor-infos f)
                  (stable-sort (nreverse groups)
                               (lambda (a b)
                                 (let ((ia (ggml-id (bench-product-type a)))
                                       (ib (ggml-id (bench-product-type b))))
                                   (or (< ia ib)
                                       (and (= ia ib)
                                            (< (bench-product-bytes a) (bench-product-bytes b))))))))
      (let ((shape (gguf:tensor-info-shape info))
            (type (gguf:tensor-info-type info)))
        (when (and (= 2 (length shape)) (quantized-type-p (gguf:tensor-info-type-id info)))
          (let ((p (or (find-if (lambda (p) (and (string= type (bench-product-type p))
                                                 (= (first shape) (bench-product-rows p))
                                                 (= (second shape) (bench-product-cols p))))
                                groups)
                       (first (push (make-bench-product type (first shape) (second shape)
                                                           (gguf:tensor-info-bytes info))
                                    groups)))))
            (setf (bench-product-names p)
                  (append (bench-product-names p) (list (gguf:tensor-info-name info))))))))))

(defun bench-ggml ()
  "llama.cpp's ggml for the products: (values variant directory) when its
CPU library loaded, else (values NIL reason)."
  (let ((dir (llama-library-directory "libggml-base.so")))
    (if (null dir)
        (values nil (format nil "no libggml-base.so in ~A; set RL_LLAMA_LIB to the path of ~
libllama.v0.5.0.so, or run from a source tree that has build/cache/llama/"
                            (llama-library-place)))
        (multiple-value-bind (variant reason) (%ggml-open (native-namestring dir))
          (if variant
              (values variant dir)
              (values nil (format nil "~A: ~A" dir reason)))))))

(defun bench-rows-median (p what times count-or-status message)
  "What %BENCH-ROWS or %BENCH-GGML-ROWS answered for P's WHAT (ours, f32,
ggml): the median of its TIMES, or NIL with the failure in P's note."
  (cond (times (bench-median times count-or-status))
        (t (setf (bench-product-note p)
                 (format nil "~@[~A; ~]~A not measured: ~(~A~): ~A" (bench-product-note p) what
                         count-or-status message))
           nil)))

(defun bench-product-measure (f p path path-name ggml iters)
  "Time P's first tensor of the file F: ours on PATH (named PATH-NAME),
the f32 rows and, with GGML, ggml's product; each at least ITERS calls and
*BENCH-PRODUCTS-MIN-NS*.  The timed product is checked against the scalar
path's bits (RONTOLISP-ERROR when they differ: a kernel bug), ggml's
against ours (a note when they are far apart)."
  (let* ((m (gguf:tensor f (first (bench-product-names p))))
         (rows (bench-product-rows p)) (cols (bench-product-cols p))
         (x (%bench-fill-random (make-array cols :element-type 'single-float) 11))
         (out (make-array rows :element-type 'single-float))
         (ref (make-array rows :element-type 'single-float))
         (label (format nil "~A ~Dx~D" (bench-product-type p) rows cols)))
    (flet ((time-rows (what fn &rest args)
             (bench-progress "~A: ~A" label what)
             (multiple-value-bind (times count message)
                 (apply fn (append args (list iters *bench-products-min-ns* *bench-budget-ns*)))
               (when (and times (string= what "ours"))
                 (setf (bench-product-calls p) count))
               (bench-rows-median p what times count message))))
      (setf (bench-product-ours p) (time-rows "ours" #'%bench-rows m x out path))
      (when (bench-product-ours p)
        (multiple-value-bind (done status message) (%bench-rows m x ref 0 1 0 0)
          (unless done
            (rontolisp-error 'bench "the scalar product of ~A failed (~(~A~)): ~A" label status
                             message)))
        (unless (every (lambda (a b) (= (%single-bits a) (%single-bits b))) out ref)
          (rontolisp-error 'bench "the ~A product of ~A answered other bits than the scalar ~
reference (a kernel bug)" path-name label)))
      (let ((f32 (dequantize m)))
        (setf (bench-product-f32 p)
              (time-rows "f32" #'%bench-rows f32 x (make-array rows :element-type 'single-float) path)))
      (when ggml
        (let ((theirs (make-array rows :element-type 'single-float)))
          (setf (bench-product-ggml p) (time-rows "ggml" #'%bench-ggml-rows m x theirs))
          (when (bench-product-ggml p)
            (let ((big (reduce #'max ref :key #'abs :initial-value 0.0))
                  (far (reduce #'max (map 'vector (lambda (a b) (abs (- a b))) ref theirs)
                               :initial-value 0.0)))
              (when (> far (* 1e-3 big))
                (setf (bench-product-note p)
                      (format nil "ggml's product differs from ours by ~,3E (largest ~,3E)"
                              far big))))))))
    p))

(defun bench-products (f cpu iters)
  "The products of the GGUF file F by type and shape (BENCH-PRODUCT-GROUPS,
each measured by BENCH-PRODUCT-MEASURE on CPU's best path), and ggml's
state: (values products ggml-plist), the plist :variant, :directory and
:note (why ggml is not measured)."
  (let ((groups (bench-product-groups f))
        (best (first (last (getf cpu :paths)))))
    (multiple-value-bind (variant where) (if groups (bench-ggml) (values nil nil))
      (dolist (p groups)
        (handler-case (bench-product-measure f p (car best) (cdr best) variant iters)
          (storage-condition ()
            (setf (bench-product-note p) "out of memory"))))
      (values groups
              (list :variant variant :directory (and variant where)
                    :note (and (not variant) where))))))

(defun bench-product-us (ns) (and ns (/ ns 1d3)))

(defun bench-product-ratio (p)
  "Our time over ggml's for P, or NIL."
  (and (bench-product-ours p) (bench-product-ggml p)
       (/ (bench-product-ours p) (bench-product-ggml p))))

(defun print-bench-products (stream products ggml path-name)
  "The products table of a file's report: one row per type and shape."
  (when products
    (format stream "~%Products in the file's own types, one row per type and shape, 1 thread, ~A ~
path:~%median us of one matrix-vector product (x quantized to the type's activation blocks, then ~
every~%row's product); f32: the same rows dequantized once; ggml: llama.cpp's product of the ~
same~%bytes; ours/ggml below 1: ours is faster~%" path-name)
    (if (getf ggml :variant)
        (format stream "ggml: libggml-cpu-~A.so in ~A~%" (getf ggml :variant)
                (getf ggml :directory))
        (format stream "ggml: not found (~A)~%" (getf ggml :note)))
    (format stream "~7A ~12@A ~8@A ~10@A ~7@A ~10@A ~7@A ~10@A ~9@A~%"
            "type" "rows x cols" "tensors" "ours us" "GB/s" "f32 us" "GB/s" "ggml us" "ours/ggml")
    (dolist (p products)
      (let ((ours (bench-product-ours p)) (f32 (bench-product-f32 p))
            (rows (bench-product-rows p)) (cols (bench-product-cols p)))
        (format stream "~7A ~12@A ~8@A ~10@A ~7@A ~10@A ~7@A ~10@A ~9@A~@[  ~A~]~%"
                (bench-product-type p) (format nil "~Dx~D" rows cols)
                (length (bench-product-names p))
                (if ours (format nil "~,2F" (bench-product-us ours)) "-")
                (if ours (format nil "~,2F" (/ (bench-product-bytes p) ours)) "-")
                (if f32 (format nil "~,2F" (bench-product-us f32)) "-")
                (if f32 (format nil "~,2F" (/ (bench-f32-bytes rows cols) f32)) "-")
                (if (bench-product-ggml p) (format nil "~,2F" (bench-product-us (bench-product-ggml p))) "-")
                (if (bench-product-ratio p) (format nil "~,2Fx" (bench-product-ratio p)) "-")
                (bench-product-note p))))))

(defun bench-products-json (products ggml)
  "The \"products\" object of the bench JSON."
  (list :object
        (cons "ggml" (list :object
                           (cons "variant" (or (getf ggml :variant) :null))
                           (cons "directory" (or (getf ggml :directory) :null))
                           (cons "note" (or (getf ggml :note) :null))))
        (cons "min_seconds" (/ *bench-products-min-ns* 1d9))
        (cons "rows"
              (map 'vector
                   (lambda (p)
                     (list :object
                           (cons "type" (bench-product-type p))
                           (cons "rows" (bench-product-rows p))
                           (cons "cols" (bench-product-cols p))
                           (cons "tensors" (length (bench-product-names p)))
                           (cons "names" (coerce (bench-product-names p) 'vector))
                           (cons "weight_bytes" (bench-product-bytes p))
                           (cons "calls" (or (bench-product-calls p) :null))
                           (cons "ours_us" (bench-number (bench-product-us (bench-product-ours p))))
                           (cons "ours_gbps" (bench-number (and (bench-product-ours p)
                                                                (/ (bench-product-bytes p)
                                                                   (bench-product-ours p)))))
                           (cons "f32_us" (bench-number (bench-product-us (bench-product-f32 p))))
                           (cons "ggml_us" (bench-number (bench-product-us (bench-product-ggml p))))
                           (cons "ours_over_ggml" (bench-number (bench-product-ratio p)))
                           (cons "note" (or (bench-product-note p) :null))))
                   products))))
