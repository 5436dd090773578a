;;;; compare-tensors.lisp - part of `make demo': are the tensors of two GGUF
;;;; files the same, name for name, type for type and byte for byte?
;;;;   rontolisp script tests/demo/compare-tensors.lisp OURS.gguf REFERENCE.gguf

(defun tensor-octets (f name)
  (let ((x (gguf:tensor f name)))
    (typecase x
      (rontolisp:quantized-matrix (rontolisp:quantized-matrix-octets x))
      ((or rontolisp:float16-array rontolisp:bfloat16-array) (rontolisp:half-array-bits x))
      (t x))))

(destructuring-bind (ours reference) rontolisp:*args*
  (gguf:with-file (a ours)
    (gguf:with-file (b reference)
      (let ((same 0) (differ '()))
        (dolist (info (gguf:tensor-infos b))
          (let ((name (gguf:tensor-info-name info)))
            (if (and (member name (gguf:tensor-names a) :test #'string=)
                     (string= (gguf:tensor-info-type info)
                              (gguf:tensor-info-type (gguf:tensor-info a name)))
                     (equalp (tensor-octets a name) (tensor-octets b name)))
                (incf same)
                (push name differ))))
        (format t "~D of ~D tensors identical to ~A (names, types, bytes)~%"
                same (length (gguf:tensor-infos b)) reference)
        (when differ
          (format t "differ: ~{~A~^, ~}~%" differ)
          (rontolisp:exit 1))))))
