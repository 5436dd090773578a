;;;; calibrate.lisp - the work behind `rontolisp calibrate' beyond
;;;; MODEL:CALIBRATE: the picture of --svg FILE.

(in-package "COMMAND-LINE")

(defun calibration-svg (path title calibration)
  "The picture of CALIBRATION (a list of (name . magnitudes), as
MODEL:CALIBRATE answers it) at PATH: a panel per matrix, max |x| against
the input channel on a logarithmic axis, its outlier columns
(OUTLIER-COLUMNS) marked."
  (write-svg-figure
   path title
   (loop for (name . magnitudes) in calibration
         collect (list :title name :x-label "input channel" :y-label "max |x|" :y-log t
                       :series (list (list :name "max |x| per channel" :marker nil
                                           :points (loop for m across magnitudes for i from 0
                                                         collect (cons i m)))
                                     (list :name "outlier column" :line nil :colour "#d62728"
                                           :points (loop for c in (outlier-columns magnitudes)
                                                         collect (cons c (aref magnitudes c)))))))
   :columns 4 :panel-size '(360 240)
   :notes (list "outlier column: one that quantize --calibration scales apart (doc/outliers.md)")
   :what "channel magnitudes"))
