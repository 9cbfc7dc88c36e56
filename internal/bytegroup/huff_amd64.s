//go:build !purego

#include "textflag.h"

// BMI2 (SHLX, SHRX: shifts by any register): two 1X Huffman streams coded
// side by side, four symbols of each a step, each from its last symbol
// back. The Go caller (huff_amd64.go) passes n, the steps, with room for
// 11n/2+8 bytes past each out pointer, and finishes each stream (huff.go,
// finish).

// func codePair(code *[256]uint32, a, b, oa, ob *byte, n int, st *pairState)
// a and b point at the first of each stream's 4n symbols; st holds the
// two accumulators and bit counts, in and out, and how far each out
// pointer advanced.
TEXT ·codePair(SB), NOSPLIT, $0-56
	MOVQ code+0(FP), R8
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ oa+24(FP), R9
	MOVQ ob+32(FP), R10
	MOVQ n+40(FP), CX
	LEAQ (SI)(CX*4), SI // past the 4n symbols: each is coded from its end
	LEAQ (DI)(CX*4), DI
	MOVQ st+48(FP), AX
	MOVQ 0(AX), R11  // stream a: accumulator
	MOVQ 8(AX), R12  //           bit count
	MOVQ 16(AX), R13 // stream b: accumulator
	MOVQ 24(AX), BX  //           bit count
	TESTQ CX, CX
	JZ    pairdone

#define SYM(src, off, acc, nb) \
	MOVBQZX off(src), AX \
	MOVL    (R8)(AX*4), AX \
	MOVL    AX, DX \
	SHRL    $16, DX \
	MOVWLZX AX, AX \
	SHLXQ   nb, AX, AX \
	ORQ     AX, acc \
	ADDQ    DX, nb

#define FLUSH(out, acc, nb) \
	MOVQ  acc, (out) \
	MOVQ  nb, AX \
	SHRQ  $3, AX \
	ADDQ  AX, out \
	MOVQ  nb, AX \
	ANDQ  $56, AX \
	SHRXQ AX, acc, acc \
	ANDQ  $7, nb

pairloop:
	SYM(SI, -1, R11, R12)
	SYM(DI, -1, R13, BX)
	SYM(SI, -2, R11, R12)
	SYM(DI, -2, R13, BX)
	SYM(SI, -3, R11, R12)
	SYM(DI, -3, R13, BX)
	SYM(SI, -4, R11, R12)
	SYM(DI, -4, R13, BX)
	FLUSH(R9, R11, R12)
	FLUSH(R10, R13, BX)
	SUBQ $4, SI
	SUBQ $4, DI
	DECQ CX
	JNZ  pairloop

pairdone:
	MOVQ st+48(FP), AX
	MOVQ R11, 0(AX)
	MOVQ R12, 8(AX)
	MOVQ R13, 16(AX)
	MOVQ BX, 24(AX)
	SUBQ oa+24(FP), R9
	SUBQ ob+32(FP), R10
	MOVQ R9, 32(AX)
	MOVQ R10, 40(AX)
	RET
