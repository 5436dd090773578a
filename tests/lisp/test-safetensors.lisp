;;;; test-safetensors.lisp - the safetensors reader refuses every kind of
;;;; broken file with its reason and the file's name.

(in-package "RONTOLISP-TESTS")

(def-suite safetensors :in all :description "The safetensors reader.")
(in-suite safetensors)

(defun write-octets (path octets)
  (with-open-file (s path :direction :output :element-type '(unsigned-byte 8) :if-exists :supersede)
    (write-sequence octets s))
  path)

(defun safetensors-octets (header &optional (data #()))
  (let* ((h (rontolisp::%utf8-octets header))
         (v (make-array (+ 8 (length h) (length data)) :element-type '(unsigned-byte 8))))
    (dotimes (i 8) (setf (aref v i) (ldb (byte 8 (* 8 i)) (length h))))
    (replace v h :start1 8)
    (replace v data :start1 (+ 8 (length h)))
    v))

(test safetensors-refuses-bad-files
  (let ((path (tmp-path "bad.safetensors")))
    (unwind-protect
         (loop for (octets reason) in
               (list (list (make-array 4 :element-type '(unsigned-byte 8)) :truncated)
                     (list (safetensors-octets "{\"a\":1" ) :json)
                     (list (let ((v (safetensors-octets "{}"))) (setf (aref v 7) 1) v) :header-length)
                     (list (safetensors-octets "[]") :header)
                     (list (safetensors-octets "{\"t\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}"
                                               (make-array 8 :initial-element 0)) :dtype)
                     (list (safetensors-octets "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}"
                                               (make-array 8 :initial-element 0)) :size)
                     (list (safetensors-octets "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}"
                                               (make-array 4 :initial-element 0)) :offsets)
                     (list (safetensors-octets "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}"
                                               (make-array 4 :initial-element 0)) :offsets)
                     (list (safetensors-octets "{\"t\":{\"dtype\":\"F32\",\"shape\":[1e999],\"data_offsets\":[0,4]}}"
                                               (make-array 4 :initial-element 0)) :json)
                     (list (safetensors-octets "{\"t\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}"
                                               (make-array 4 :initial-element 0)) :shape)
                     (list (safetensors-octets "{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}"
                                               (make-array 4 :initial-element 0)) :shape)
                     (list (safetensors-octets "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}"
                                               (make-array 8 :initial-element 0)) :overlap))
               do (write-octets path octets)
                  (handler-case (progn (rontolisp:read-safetensors path)
                                       (fail "expected ~S to be refused" reason))
                    (rontolisp:safetensors-error (c)
                      (is (eq reason (rontolisp:safetensors-error-reason c)))
                      (is (search path (princ-to-string c))))))
      (ignore-errors (delete-file path)))))
