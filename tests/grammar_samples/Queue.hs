module Data.Queue where

-- | A FIFO queue of two lists.
data Queue a = Queue [a] [a]

-- | Adds an element at the back.
push :: a -> Queue a -> Queue a
push x (Queue f b) = Queue f (x : b)
