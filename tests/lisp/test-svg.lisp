;;;; test-svg.lisp - the pictures' writer (lisp/text/svg.lisp): text escaped
;;;; for XML, tick labels, finite coordinates only, a figure read back as
;;;; XML and drawn by chromium, and the refusals (nothing to plot, a target
;;;; that cannot be written).

(in-package "RONTOLISP-TESTS")

(def-suite svg :in all :description "The SVG pictures of --svg FILE.")
(in-suite svg)

(test svg-escape-markup-and-characters-xml-refuses
  (is (string= "a&lt;b&amp;&quot;c&apos;&gt;" (text::svg-escape "a<b&\"c'>")))
  (is (string= (coerce (list #\x (code-char #xFFFD) #\y (code-char #xFFFD) #\Tab #\é) 'string)
               (text::svg-escape (coerce (list #\x (code-char 7) #\y (code-char #xDC80) #\Tab #\é)
                                              'string)))))

(test svg-tick-text-is-short-and-plain
  (loop for (v text) in '((0 "0") (0.01d0 "0.01") (1d-5 "1e-5") (2d-4 "2e-4") (1000 "1000")
                          (2.5d6 "2.5e6") (0.5d0 "0.5") (100000d0 "100000") (1d6 "1e6"))
        do (is (string= text (text::svg-tick-text v)) "~S: ~S" v (text::svg-tick-text v))))

(test svg-figure-reads-back-and-draws
  "A figure of a lines panel (a name with markup characters, a NaN, an
infinity and a NIL among the points, a zero on a logarithmic axis) and a
bars panel: XML with finite coordinates, every series drawn and in the
legend under its own name, and each colour found in chromium's drawing."
  (let ((path (tmp-path "figure.svg")))
    (unwind-protect
         (progn
           (text:write-svg-figure
            path "a <title> & more"
            (list (list :title "lines" :x-label "x" :y-label "y" :y-log t
                        :series (list (list :name "<F16 & co>"
                                            :points (list '(1 . 0.5d0) (cons 2 (rontolisp::%bits-single #x7fc00000)) '(3 . 2d0)
                                                          '(4 . nil) '(5 . 0)))
                                      (list :name "dashed" :dashed t
                                            :points (list '(1 . 1d0) (cons 2 ext:double-float-positive-infinity)
                                                          '(5 . 3d0)))
                                      (list :name "marks" :line nil :points '((2 . 1.5d0)))))
                  (list :title "bars" :kind :bars :categories '("a" "b") :x-label "µs"
                        :series (list (list :name "one" :points '(("a" . 3) ("b" . 4)))
                                      (list :name "two" :points '(("a" . 1) ("b" . nil)))))))
           (let ((report (check-svg-picture path :series '("<F16 & co>" "dashed" "marks" "one" "two")
                                                 :panels '("lines" "bars")
                                                 :texts '("a <title> & more" "µs"))))
             (when report
               (let ((s (gethash "series" report)))
                 (is (= 3 (gethash "marks" (gethash "<F16 & co>" s))) "the NaN and NIL points are left out")
                 (is (= 2 (gethash "marks" (gethash "dashed" s))) "the infinity is left out")
                 (is (= 1 (gethash "bars" (gethash "two" s))))))))
      (ignore-errors (delete-file path)))))

(test svg-figure-with-nothing-to-plot-is-refused
  (let ((path (tmp-path "empty.svg")))
    (let ((message (error-message
                    (lambda ()
                      (text:write-svg-figure
                       path "empty" (list (list :title "p" :series (list (list :name "s" :points '((1 . nil))))))
                       :what "encoder timings")))))
      (is (contains message path) "~A" message)
      (is (contains message "expected encoder timings to plot, found none") "~A" message))
    (is (null (probe-file path)) "a refused picture left a file")))

(test svg-target-that-cannot-be-written-is-refused-first
  (with-tmp-dir (dir)
    (let ((missing (format nil "~A/no/such/dir/x.svg" dir)))
      (let ((message (error-message (lambda () (text:check-svg-target missing)))))
        (is (contains message missing) "~A" message)
        (is (contains message "expected an existing directory") "~A" message)))
    (let ((message (error-message (lambda () (text:check-svg-target dir)))))
      (is (contains message "expected a regular file or no file for the SVG, found a directory")
          "~A" message))
    (let ((ok (format nil "~A/ok.svg" dir)))
      (is (equal ok (text:check-svg-target ok)))
      (is (null (names-in dir)) "the check left ~S" (names-in dir)))))

(test svg-axis-ticks
  "A linear axis ends on ticks, whole numbers get whole steps; a logarithmic
one spans whole decades, with 2 and 5 within two decades and at most nine
ticks over many."
  (destructuring-bind (lo hi log ticks) (text::svg-axis '(0 1 2 3))
    (is (and (= lo 0) (= hi 3) (not log)))
    (is (equal '(0 1 2 3) (mapcar #'round ticks)) "~S" ticks))
  (destructuring-bind (lo hi log ticks) (text::svg-axis '(0.3d0 4d0) :log t)
    (is (and (= lo 0.1d0) (= hi 10d0) log))
    (is (= 7 (length ticks)) "~S" ticks))
  (destructuring-bind (lo hi log ticks) (text::svg-axis '(1d-20 1d0 0 -1) :log t)
    (declare (ignore log))
    (is (<= (length ticks) 9) "~S" ticks)
    (is (and (<= lo 1d-20) (>= hi 1d0)))))
