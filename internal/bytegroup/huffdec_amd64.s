//go:build !purego

#include "textflag.h"

// BMI2 (SHLX: a shift by any register): four huff0 streams decoded side
// by side, four lookups of each a round, each lookup up to four symbols
// (huffDecoder.multi). The Go caller (huffdec_amd64.go) passes the state;
// a round starts only while every stream has a whole window (8 bytes)
// before its position and 16 bytes of room before its end, and the state
// is written back at the first stream that has not, for Go's loops to
// finish (huffdec.go).

// func decode4(t *[2048]uint64, dst *byte, q *huffQuad)
TEXT ·decode4(SB), NOSPLIT, $0-24
	MOVQ t+0(FP), R8
	MOVQ dst+8(FP), AX
	MOVQ q+16(FP), R9
	// The output offsets and limits become pointers.
	MOVQ 96(R9), SI
	ADDQ AX, SI
	MOVQ 104(R9), DI
	ADDQ AX, DI
	MOVQ 112(R9), BX
	ADDQ AX, BX
	MOVQ 120(R9), DX
	ADDQ AX, DX
	ADDQ AX, 128(R9)
	ADDQ AX, 136(R9)
	ADDQ AX, 144(R9)
	ADDQ AX, 152(R9)
	MOVQ 64(R9), R10
	MOVQ 72(R9), R11
	MOVQ 80(R9), R12
	MOVQ 88(R9), R13

// RELOAD: stream i (position at off(q), first byte at in(q), c, its
// window in v, out) moves its window down by the whole bytes read, or
// the round does not start. R9 is q until it is the scratch of LOOK.
#define RELOAD(in, pos, hi, c, v, out) \
	CMPQ    out, hi(R9) \
	JGT     done \
	MOVQ    c, AX \
	SHRQ    $3, AX \
	NEGQ    AX \
	ADDQ    pos(R9), AX \
	CMPQ    AX, $8 \
	JLT     done \
	MOVQ    AX, pos(R9) \
	ANDQ    $7, c \
	ADDQ    in(R9), AX \
	MOVQ    -8(AX), v

// LOOK: one lookup: the symbols' 4 bytes stored, out advanced by their
// count, c by their bits (and by count<<8, which the round's end masks
// off: the shift reads c's low 6 bits only).
#define LOOK(c, v, out) \
	SHLXQ c, v, AX \
	SHRQ  $53, AX \
	MOVQ  (R8)(AX*8), AX \
	MOVL  AX, (out) \
	SHRQ  $32, AX \
	ADDQ  AX, c \
	SHRL  $8, AX \
	ADDQ  AX, out

loop:
	MOVQ q+16(FP), R9
	RELOAD(0, 32, 128, R10, CX, SI)
	MOVQ CX, 160(R9)
	RELOAD(8, 40, 136, R11, CX, DI)
	MOVQ CX, 168(R9)
	RELOAD(16, 48, 144, R12, R14, BX)
	RELOAD(24, 56, 152, R13, R15, DX)
	MOVQ 160(R9), R9
	MOVQ q+16(FP), CX
	MOVQ 168(CX), CX
	LOOK(R10, R9, SI)
	LOOK(R11, CX, DI)
	LOOK(R12, R14, BX)
	LOOK(R13, R15, DX)
	LOOK(R10, R9, SI)
	LOOK(R11, CX, DI)
	LOOK(R12, R14, BX)
	LOOK(R13, R15, DX)
	LOOK(R10, R9, SI)
	LOOK(R11, CX, DI)
	LOOK(R12, R14, BX)
	LOOK(R13, R15, DX)
	LOOK(R10, R9, SI)
	LOOK(R11, CX, DI)
	LOOK(R12, R14, BX)
	LOOK(R13, R15, DX)
	MOVBQZX R10, R10
	MOVBQZX R11, R11
	MOVBQZX R12, R12
	MOVBQZX R13, R13
	JMP loop

done:
	MOVQ q+16(FP), R9
	MOVQ R10, 64(R9)
	MOVQ R11, 72(R9)
	MOVQ R12, 80(R9)
	MOVQ R13, 88(R9)
	MOVQ dst+8(FP), AX
	SUBQ AX, SI
	SUBQ AX, DI
	SUBQ AX, BX
	SUBQ AX, DX
	MOVQ SI, 96(R9)
	MOVQ DI, 104(R9)
	MOVQ BX, 112(R9)
	MOVQ DX, 120(R9)
	RET
